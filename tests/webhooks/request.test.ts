import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { postWebhook, type Resolve } from "../../src/services/webhookRequest.ts";
import { isPrivateAddress, isPrivateHost } from "../../src/services/webhookUrls.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../helpers/webhookReceiver.ts";

/**
 * One webhook request: the address checked is the address connected to (one lookup, inside the
 * request: no DNS rebinding), the lookup counts in the time bound, and IPv6 forms that carry an IPv4
 * address are judged by it.
 */

let receiver: WebhookReceiver;
beforeAll(() => {
  receiver = startWebhookReceiver();
});
afterAll(() => receiver.stop());

const PRIVATE = "url resolves to a loopback, private or reserved address";
const refusePrivate = (address: string) => (isPrivateAddress(address) ? PRIVATE : null);
const allowAll = () => null;

/** A resolver that answers from a script, one answer per lookup, and counts the lookups. */
function scripted(...answers: (string[] | "hang")[]) {
  const asked: string[] = [];
  const resolve: Resolve = (host) => {
    asked.push(host);
    const answer = answers[Math.min(asked.length - 1, answers.length - 1)]!;
    return answer === "hang" ? new Promise<string[]>(() => {}) : Promise.resolve(answer);
  };
  return { resolve, asked };
}

/** The receiver's URL under another host name (which no DNS knows). */
const named = (host: string, path: string) => receiver.url(path).replace("127.0.0.1", host);

const post = (url: string, resolve: Resolve, refuse: (a: string) => string | null, timeoutMs = 5_000) =>
  postWebhook({
    url,
    headers: { "content-type": "application/json" },
    body: "{}",
    timeoutMs,
    resolve,
    refuse,
  });

describe("the address connected to is the address checked", () => {
  test("one lookup, inside the request; the connection goes to its answer, with the URL's Host", async () => {
    const dns = scripted(["127.0.0.1"]);
    const answer = await post(named("hooks.rebind.test", "/pinned"), dns.resolve, allowAll);
    expect(answer).toEqual({ status: 200 });
    expect(dns.asked).toEqual(["hooks.rebind.test"]);
    const [got] = receiver.at("/pinned");
    expect(got!.headers.host).toBe(`hooks.rebind.test:${new URL(receiver.url("/")).port}`);
    expect(got!.body).toBe("{}");
  });

  test("a name answering a public address first and a private one next is never connected to the private one", async () => {
    // A rebinding name: the first answer passes the check; a second lookup would get the receiver.
    const dns = scripted(["93.184.215.14"], ["127.0.0.1"]);
    const answer = await post(named("rebinding.test", "/rebound"), dns.resolve, refusePrivate, 500);
    expect(dns.asked).toEqual(["rebinding.test"]);
    // The public address passed the check and was connected to (unreachable from here, or no
    // answer in time): the attempt fails for that, and nothing reaches us.
    expect("error" in answer && answer.error).not.toBe(PRIVATE);
    expect("error" in answer).toBe(true);
    expect(receiver.at("/rebound")).toEqual([]);
  });

  test("any private address in the answer refuses the request before connecting", async () => {
    for (const answer of [
      ["10.0.0.7"],
      ["93.184.216.34", "127.0.0.1"],
      ["::1"],
      ["::ffff:169.254.169.254"],
    ]) {
      const dns = scripted(answer);
      expect(await post(named("inside.test", "/inside"), dns.resolve, refusePrivate)).toEqual({
        error: PRIVATE,
      });
    }
    expect(receiver.at("/inside")).toEqual([]);
  });

  test("a literal private address is refused without a lookup", async () => {
    const dns = scripted(["93.184.216.34"]);
    expect(await post(receiver.url("/literal"), dns.resolve, refusePrivate)).toEqual({ error: PRIVATE });
    expect(dns.asked).toEqual([]);
    expect(receiver.at("/literal")).toEqual([]);
  });

  test("an unknown name fails as such", async () => {
    const resolve: Resolve = () => Promise.reject(new Error("ENOTFOUND"));
    expect(await post(named("nowhere.test", "/x"), resolve, allowAll)).toEqual({
      error: "host name not found",
    });
    expect(await post(named("empty.test", "/x"), scripted([]).resolve, allowAll)).toEqual({
      error: "host name not found",
    });
  });
});

describe("the time bound", () => {
  test("a lookup that never answers is within the bound", async () => {
    const begun = performance.now();
    const answer = await post(named("slow-dns.test", "/x"), scripted("hang").resolve, allowAll, 200);
    expect(answer).toEqual({ error: "no answer within 200 ms" });
    expect(performance.now() - begun).toBeLessThan(2_000);
  });

  test("a receiver that never answers is within the bound; a redirect is an answer, not followed", async () => {
    const dns = scripted(["127.0.0.1"]);
    expect(await post(named("a.test", "/hang-bound"), dns.resolve, allowAll, 200)).toEqual({
      error: "no answer within 200 ms",
    });
    receiver.script("/moved-away", [302]);
    expect(await post(named("a.test", "/moved-away"), dns.resolve, allowAll)).toEqual({ status: 302 });
    expect(receiver.at("/elsewhere")).toEqual([]);
  });
});

describe("IPv6 forms that carry an IPv4 address are judged by it", () => {
  const privateOnes = [
    "::ffff:127.0.0.1",
    "::ffff:0:10.1.2.3", // IPv4-translated
    "64:ff9b::192.168.1.1", // NAT64
    "64:ff9b::a9fe:a9fe", // NAT64 of 169.254.169.254
    "64:ff9b:1::8.8.8.8", // local-use NAT64 prefix: never public
    "2002:7f00:1::", // 6to4 of 127.0.0.1
    "2002:a00:1:1::1", // 6to4 of 10.0.0.1
    "2002:c0a8:101::", // 6to4 of 192.168.1.1
    "2001:0:4136:e378:8000:63bf:80ff:fffe", // Teredo, client 127.0.0.1
    "100::1", // discard-only
  ];
  const publicOnes = [
    "::ffff:8.8.8.8",
    "64:ff9b::8.8.8.8",
    "2002:808:808::1", // 6to4 of 8.8.8.8
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7", // Teredo, client 8.8.8.8
    "2606:4700:4700::1111",
  ];
  test.each(privateOnes)("%s is private", (address) => {
    expect(isPrivateAddress(address)).toBe(true);
    expect(isPrivateHost(`[${address}]`)).toBe(true);
  });
  test.each(publicOnes)("%s is public", (address) => {
    expect(isPrivateAddress(address)).toBe(false);
    expect(isPrivateHost(`[${address}]`)).toBe(false);
  });
  test("resolved IPv4 addresses and anything that is not an address", () => {
    expect(isPrivateAddress("8.8.8.8")).toBe(false);
    for (const a of ["10.0.0.1", "169.254.169.254", "0.0.0.0", "not-an-address", "", "1.2.3"]) {
      expect({ a, private: isPrivateAddress(a) }).toEqual({ a, private: true });
    }
  });
});

describe("the special-purpose registries, edge to edge", () => {
  /** Each block never connected to, by its first and last address, and the public neighbours around it. */
  const v4 = [
    { block: "0.0.0.0/8", first: "0.0.0.0", last: "0.255.255.255", after: "1.0.0.0" },
    {
      block: "10.0.0.0/8",
      before: "9.255.255.255",
      first: "10.0.0.0",
      last: "10.255.255.255",
      after: "11.0.0.0",
    },
    {
      block: "100.64.0.0/10",
      before: "100.63.255.255",
      first: "100.64.0.0",
      last: "100.127.255.255",
      after: "100.128.0.0",
    },
    {
      block: "127.0.0.0/8",
      before: "126.255.255.255",
      first: "127.0.0.0",
      last: "127.255.255.255",
      after: "128.0.0.0",
    },
    {
      block: "169.254.0.0/16",
      before: "169.253.255.255",
      first: "169.254.0.0",
      last: "169.254.255.255",
      after: "169.255.0.0",
    },
    {
      block: "172.16.0.0/12",
      before: "172.15.255.255",
      first: "172.16.0.0",
      last: "172.31.255.255",
      after: "172.32.0.0",
    },
    {
      block: "192.0.0.0/24",
      before: "191.255.255.255",
      first: "192.0.0.0",
      last: "192.0.0.255",
      after: "192.0.1.0",
    },
    {
      block: "192.0.2.0/24",
      before: "192.0.1.255",
      first: "192.0.2.0",
      last: "192.0.2.255",
      after: "192.0.3.0",
    },
    {
      block: "192.88.99.0/24",
      before: "192.88.98.255",
      first: "192.88.99.0",
      last: "192.88.99.255",
      after: "192.88.100.0",
    },
    {
      block: "192.168.0.0/16",
      before: "192.167.255.255",
      first: "192.168.0.0",
      last: "192.168.255.255",
      after: "192.169.0.0",
    },
    {
      block: "198.18.0.0/15",
      before: "198.17.255.255",
      first: "198.18.0.0",
      last: "198.19.255.255",
      after: "198.20.0.0",
    },
    {
      block: "198.51.100.0/24",
      before: "198.51.99.255",
      first: "198.51.100.0",
      last: "198.51.100.255",
      after: "198.51.101.0",
    },
    {
      block: "203.0.113.0/24",
      before: "203.0.112.255",
      first: "203.0.113.0",
      last: "203.0.113.255",
      after: "203.0.114.0",
    },
    {
      block: "224.0.0.0/4 and 240.0.0.0/4",
      before: "223.255.255.255",
      first: "224.0.0.0",
      last: "255.255.255.255",
    },
  ];
  const v6 = [
    {
      block: "outside 2000::/3",
      first: "::",
      last: "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
      after: "2000::",
    },
    {
      block: "2001::/23",
      before: "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
      first: "2001:0:0:0:0:0:ffff:ffff",
      last: "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
      after: "2001:200::",
    },
    {
      block: "2001:db8::/32",
      before: "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff",
      first: "2001:db8::",
      last: "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
      after: "2001:db9::",
    },
    {
      block: "3fff::/20",
      before: "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
      first: "3fff::",
      last: "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
      after: "3fff:1000::",
    },
    {
      block: "outside 2000::/3, above it",
      before: "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
      first: "4000::",
      last: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    },
  ];
  /** Globally reachable addresses inside those blocks, and the refused ones right beside them. */
  const exceptions = {
    public: [
      "192.0.0.9",
      "192.0.0.10",
      "192.0.78.10",
      "192.0.78.255",
      "2001:1::1",
      "2001:1::3",
      "2001:3::",
      "2001:3:ffff:ffff:ffff:ffff:ffff:ffff",
      "2001:4:112::",
      "2001:4:112:ffff:ffff:ffff:ffff:ffff",
      "2001:20::",
      "2001:3f:ffff:ffff:ffff:ffff:ffff:ffff",
      "2620:4f:8000::1",
      "2a00:1450:4007:80e::200e",
    ],
    private: [
      "192.0.0.8",
      "192.0.0.11",
      "192.0.0.170",
      "2001:1::",
      "2001:1::4",
      "2001:2::1",
      "2001:2:ffff:ffff:ffff:ffff:ffff:ffff",
      "2001:4:111:ffff:ffff:ffff:ffff:ffff",
      "2001:4:113::",
      "2001:10::1",
      "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff",
      "2001:40::",
      "::1",
      "::ffff:0:0",
      "100::1",
      "100:0:0:1::1",
      "5f00::1",
      "fc00::1",
      "fdff::1",
      "fe80::1",
      "fec0::1",
      "ff02::1",
    ],
  };
  const judged = (a: string) => ({
    address: a,
    private: isPrivateAddress(a),
    host: isPrivateHost(a.includes(":") ? `[${a}]` : a),
  });
  test.each([...v4, ...v6])("$block", ({ before, first, last, after }) => {
    for (const a of [first, last]) expect(judged(a)).toEqual({ address: a, private: true, host: true });
    for (const a of [before, after].filter((x) => x !== undefined)) {
      expect(judged(a)).toEqual({ address: a, private: false, host: false });
    }
  });
  test("globally reachable addresses inside them, and their refused neighbours", () => {
    for (const a of exceptions.public) expect(judged(a)).toEqual({ address: a, private: false, host: false });
    for (const a of exceptions.private) expect(judged(a)).toEqual({ address: a, private: true, host: true });
  });
});
