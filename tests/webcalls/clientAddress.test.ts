import { describe, expect, test } from "bun:test";
import {
  clientAddressResolver,
  inCidrs,
  normalizeAddress,
  parseCidrs,
  parseIp,
  rateLimitKey,
  resolveClientAddress,
  UNKNOWN_ADDRESS,
} from "../../src/http/clientAddress.ts";

describe("addresses", () => {
  test("IPv4 and IPv6 are parsed and written canonically", () => {
    const cases: [string, string | null][] = [
      ["203.0.113.9", "203.0.113.9"],
      [" 203.0.113.9 ", "203.0.113.9"],
      ["203.0.113.9:51234", "203.0.113.9"],
      ["::1", "::1"],
      ["[::1]", "::1"],
      ["[2001:db8::1]:443", "2001:db8::1"],
      ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
      ["2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"],
      ["2001:db8::1:0:0:1", "2001:db8::1:0:0:1"],
      ["fe80::1%eth0", "fe80::1"],
      ["::ffff:198.51.100.7", "198.51.100.7"],
      ["::ffff:c633:6407", "198.51.100.7"],
      ["::", "::"],
      ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
      ["256.1.1.1", null],
      ["01.2.3.4", null],
      ["1.2.3", null],
      ["1::2::3", null],
      ["1:2:3:4:5:6:7:8:9", null],
      ["12345::", null],
      ["example.com", null],
      ["", null],
      ["unknown", null],
    ];
    for (const [input, expected] of cases)
      expect([input, normalizeAddress(input)]).toEqual([input, expected]);
  });

  test("CIDRs: IPv4 and IPv6, bare addresses as single hosts; bad entries throw", () => {
    const cidrs = parseCidrs(["10.0.0.0/8", "192.168.1.7", "fd00::/8", "2001:db8:1::/48"]);
    const has = (a: string) => inCidrs(parseIp(a)!, cidrs);
    expect(has("10.255.1.2")).toBe(true);
    expect(has("11.0.0.1")).toBe(false);
    expect(has("192.168.1.7")).toBe(true);
    expect(has("192.168.1.8")).toBe(false);
    expect(has("::ffff:10.1.2.3")).toBe(true);
    expect(has("fd12:3456::1")).toBe(true);
    expect(has("fe00::1")).toBe(false);
    expect(has("2001:db8:1:ffff::1")).toBe(true);
    expect(has("2001:db8:2::1")).toBe(false);
    expect(inCidrs(parseIp("1.2.3.4")!, parseCidrs(["0.0.0.0/0"]))).toBe(true);
    expect(inCidrs(parseIp("::1")!, parseCidrs(["0.0.0.0/0"]))).toBe(false);
    for (const bad of ["10.0.0.0/33", "fd00::/129", "10.0.0.0/", "nope", "10.0.0.0/8/1", "10.0.0.0/x"]) {
      expect(() => parseCidrs([bad])).toThrow("TRUST_PROXY");
    }
  });
});

describe("resolveClientAddress", () => {
  const proxies = parseCidrs(["10.0.0.0/8", "fd00::/8"]);

  test("without TRUST_PROXY the socket peer is the address, whatever X-Forwarded-For says", () => {
    expect(resolveClientAddress("203.0.113.9", "1.1.1.1", [])).toBe("203.0.113.9");
    expect(resolveClientAddress("10.0.0.1", "1.1.1.1, 2.2.2.2", [])).toBe("10.0.0.1");
  });

  test("a peer that is not a trusted proxy is the address, X-Forwarded-For ignored", () => {
    expect(resolveClientAddress("203.0.113.9", "1.1.1.1", proxies)).toBe("203.0.113.9");
  });

  test("behind a trusted proxy: the right-most address that is not a trusted proxy", () => {
    expect(resolveClientAddress("10.0.0.1", "198.51.100.7", proxies)).toBe("198.51.100.7");
    // The visitor wrote 1.1.1.1; the proxy appended what it saw.
    expect(resolveClientAddress("10.0.0.1", "1.1.1.1, 198.51.100.7", proxies)).toBe("198.51.100.7");
    // Two proxies in a row.
    expect(resolveClientAddress("10.0.0.1", "1.1.1.1, 198.51.100.7, 10.0.0.2", proxies)).toBe("198.51.100.7");
    expect(resolveClientAddress("fd00::1", "2001:db8::7, fd00::2", proxies)).toBe("2001:db8::7");
    expect(resolveClientAddress("::ffff:10.0.0.1", "198.51.100.7:3456", proxies)).toBe("198.51.100.7");
  });

  test("behind a trusted proxy without a usable header: the nearest address known", () => {
    expect(resolveClientAddress("10.0.0.1", undefined, proxies)).toBe("10.0.0.1");
    expect(resolveClientAddress("10.0.0.1", "", proxies)).toBe("10.0.0.1");
    expect(resolveClientAddress("10.0.0.1", "garbage", proxies)).toBe("10.0.0.1");
    expect(resolveClientAddress("10.0.0.1", "198.51.100.7, garbage, 10.0.0.2", proxies)).toBe("10.0.0.2");
    // Everything is a proxy: the left-most one.
    expect(resolveClientAddress("10.0.0.1", "10.0.0.3, 10.0.0.2", proxies)).toBe("10.0.0.3");
  });

  test("no peer address at all: one shared bucket, never a header", () => {
    expect(resolveClientAddress(undefined, "1.1.1.1", proxies)).toBe(UNKNOWN_ADDRESS);
  });

  test("clientAddressResolver reads the peer handed over by the runtime and fails early on a bad TRUST_PROXY", () => {
    expect(() => clientAddressResolver(["10.0.0.0/99"])).toThrow("TRUST_PROXY");
    const resolve = clientAddressResolver(["10.0.0.0/8"]);
    const fakeContext = (peer: string, xff?: string) =>
      ({
        env: { remoteAddress: peer },
        req: { header: (name: string) => (name === "x-forwarded-for" ? xff : undefined) },
      }) as unknown as Parameters<typeof resolve>[0];
    expect(resolve(fakeContext("10.1.1.1", "198.51.100.7"))).toBe("198.51.100.7");
    expect(resolve(fakeContext("203.0.113.9", "198.51.100.7"))).toBe("203.0.113.9");
  });
});

describe("rateLimitKey", () => {
  test("IPv4 is counted by the address, IPv6 by its /64, IPv4-mapped IPv6 as the IPv4 address", () => {
    const cases: [string, string][] = [
      ["198.51.100.7", "198.51.100.7"],
      ["::ffff:198.51.100.7", "198.51.100.7"],
      ["::ffff:c633:6407", "198.51.100.7"],
      ["2001:db8:1:2::1", "2001:db8:1:2::/64"],
      ["2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"],
      ["2001:db8:1:3::1", "2001:db8:1:3::/64"],
      ["2001:DB8:0:0:aaaa::1", "2001:db8::/64"],
      ["::1", "::/64"],
      [UNKNOWN_ADDRESS, UNKNOWN_ADDRESS],
    ];
    for (const [input, expected] of cases) expect([input, rateLimitKey(input)]).toEqual([input, expected]);
  });
});
