/**
 * Which webhook targets are acceptable. In production (WEBHOOK_ALLOW_PRIVATE_URLS false) only
 * `https:` URLs to public hosts: the service must not be turned into a probe of its own network.
 * Literal addresses and `localhost` are judged here; a public name that resolves to a private address
 * is refused where the delivery connects, on the very address it connects to (webhookRequest.ts).
 */

export const WEBHOOK_URL_MAX = 2048;

/** null when acceptable, else the reason (read after the parameter name: `url: …`). */
export function webhookUrlProblem(value: string, allowPrivate: boolean): string | null {
  if (value.length > WEBHOOK_URL_MAX) return `must be at most ${WEBHOOK_URL_MAX} characters`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be an absolute URL such as https://example.com/webhooks";
  }
  if (url.protocol !== "https:" && !(allowPrivate && url.protocol === "http:")) {
    return allowPrivate ? "must be an http or https URL" : "must be an https URL";
  }
  if (url.username || url.password) return "must not carry credentials; verify the signature instead";
  // Port 0 reaches no server: every delivery would fail.
  if (url.port === "0") return "must name a port from 1 to 65535";
  if (!allowPrivate && isPrivateHost(url.hostname)) {
    return "must not point to a loopback, private, link-local or reserved address";
  }
  return null;
}

/** True for `localhost` names and for literal IP addresses that are not globally routable. */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  if (host.startsWith("[") && host.endsWith("]")) {
    const words = parseIPv6(host.slice(1, -1));
    return words === null || isPrivateIPv6(words);
  }
  const v4 = parseIPv4(host);
  return v4 !== null && isPrivateIPv4(v4);
}

/** Dotted quad only: the URL parser has already turned `2130706433`, `0x7f.1` and the like into one. */
export function parseIPv4(host: string): number[] | null {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^[0-9]{1,3}$/.test(p))) return null;
  const bytes = parts.map(Number);
  return bytes.every((b) => b <= 255) ? bytes : null;
}

/**
 * IPv4 blocks never connected to: those of the IANA IPv4 Special-Purpose Address Registry that are not
 * globally reachable (and the deprecated 6to4 relay anycast), and multicast. Everything else is
 * public, 192.0.78.0/24 (real sites) or 100.63.255.255 as much as 8.8.8.8.
 */
const PRIVATE_V4 = [
  "0.0.0.0/8", // "this network"
  "10.0.0.0/8", // private use
  "100.64.0.0/10", // shared address space (carrier-grade NAT)
  "127.0.0.0/8", // loopback
  "169.254.0.0/16", // link-local, cloud metadata
  "172.16.0.0/12", // private use
  "192.0.0.0/24", // IETF protocol assignments (but see PUBLIC_V4)
  "192.0.2.0/24", // documentation (TEST-NET-1)
  "192.88.99.0/24", // 6to4 relay anycast, deprecated
  "192.168.0.0/16", // private use
  "198.18.0.0/15", // benchmarking
  "198.51.100.0/24", // documentation (TEST-NET-2)
  "203.0.113.0/24", // documentation (TEST-NET-3)
  "224.0.0.0/4", // multicast
  "240.0.0.0/4", // reserved, and the limited broadcast 255.255.255.255
].map(v4Block);

/** Globally reachable addresses inside a block above: the PCP and TURN anycast addresses. */
const PUBLIC_V4 = ["192.0.0.9/32", "192.0.0.10/32"].map(v4Block);

/** A block as its first address (a 32-bit number) and its prefix length. */
function v4Block(cidr: string): readonly [number, number] {
  const [address, bits] = cidr.split("/");
  return [v4Number(parseIPv4(address!)!), Number(bits)];
}

function v4Number(bytes: number[]): number {
  return bytes.reduce((n, b) => n * 256 + b, 0);
}

function inV4Block(address: number, [base, bits]: readonly [number, number]): boolean {
  return bits === 0 || (address ^ base) >>> (32 - bits) === 0;
}

/** Whether an IPv4 address (four bytes) is one never to connect to. */
export function isPrivateIPv4(bytes: number[]): boolean {
  if (bytes.length !== 4) return true;
  const n = v4Number(bytes);
  return PRIVATE_V4.some((b) => inV4Block(n, b)) && !PUBLIC_V4.some((b) => inV4Block(n, b));
}

/** Eight 16-bit words, or null when not an IPv6 address. */
export function parseIPv6(text: string): number[] | null {
  let s = text.toLowerCase();
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two words.
  const quad = /^(.*:)([0-9.]+)$/.exec(s);
  if (quad?.[2]?.includes(".")) {
    const v4 = parseIPv4(quad[2]);
    if (!v4) return null;
    s = `${quad[1]}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const split = (h: string | undefined) => (h ? h.split(":") : []);
  const head = split(halves[0]);
  const tail = split(halves[1]);
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const words = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...tail];
  if (!words.every((w) => /^[0-9a-f]{1,4}$/.test(w))) return null;
  return words.map((w) => Number.parseInt(w, 16));
}

/**
 * IPv6 blocks never connected to, inside the global unicast space 2000::/3 (everything outside it is
 * link-local, unique local, multicast or not allocated): those of the IANA IPv6 Special-Purpose Address
 * Registry that are not globally reachable.
 */
const PRIVATE_V6 = [
  "2001::/23", // IETF protocol assignments (but see PUBLIC_V6)
  "2001:db8::/32", // documentation
  "3fff::/20", // documentation
].map(v6Block);

/** Globally reachable blocks inside 2001::/23 (anycast services, AMT, AS112, ORCHIDv2, drone remote ID). */
const PUBLIC_V6 = [
  "2001:1::1/128",
  "2001:1::2/128",
  "2001:1::3/128",
  "2001:3::/32",
  "2001:4:112::/48",
  "2001:20::/28",
  "2001:30::/28",
].map(v6Block);

const GLOBAL_UNICAST = v6Block("2000::/3");

/** A block as its first address (a 128-bit number) and its prefix length. */
function v6Block(cidr: string): readonly [bigint, number] {
  const [address, bits] = cidr.split("/");
  return [v6Number(parseIPv6(address!)!), Number(bits)];
}

function v6Number(words: number[]): bigint {
  return words.reduce((n, w) => (n << 16n) | BigInt(w), 0n);
}

function inV6Block(address: bigint, [base, bits]: readonly [bigint, number]): boolean {
  return (address ^ base) >> BigInt(128 - bits) === 0n;
}

/**
 * IPv6 addresses never connected to. Forms that carry an IPv4 address are judged by that address,
 * since traffic to them reaches it: IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`,
 * NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::` and Teredo `2001:0:…` (whose client address is
 * the last 32 bits inverted).
 */
export function isPrivateIPv6(w: number[]): boolean {
  const [w0 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0, w5 = 0, w6 = 0, w7 = 0] = w;
  const zeroUntil = (n: number) => w.slice(0, n).every((x) => x === 0);
  const v4 = (hi: number, lo: number) => [hi >> 8, hi & 255, lo >> 8, lo & 255];
  if (zeroUntil(5) && w5 === 0xffff) return isPrivateIPv4(v4(w6, w7)); // ::ffff:a.b.c.d
  if (zeroUntil(4) && w4 === 0xffff && w5 === 0) return isPrivateIPv4(v4(w6, w7)); // ::ffff:0:a.b.c.d
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) {
    return isPrivateIPv4(v4(w6, w7)); // NAT64 64:ff9b::/96 (64:ff9b:1::/48 is for local networks only)
  }
  if (w0 === 0x2002) return isPrivateIPv4(v4(w1, w2)); // 6to4 2002:aabb:ccdd::/48
  if (w0 === 0x2001 && w1 === 0) return isPrivateIPv4(v4(w6 ^ 0xffff, w7 ^ 0xffff)); // Teredo 2001::/32
  const n = v6Number(w);
  return (
    !inV6Block(n, GLOBAL_UNICAST) ||
    (PRIVATE_V6.some((b) => inV6Block(n, b)) && !PUBLIC_V6.some((b) => inV6Block(n, b)))
  );
}

/**
 * An address a host name resolved to (`1.2.3.4` or `2001:db8::1`, no brackets) that must not be
 * connected to. Anything that is not an address at all is refused too.
 */
export function isPrivateAddress(address: string): boolean {
  if (address.includes(":")) {
    const words = parseIPv6(address.replace(/%.*$/, ""));
    return words === null || isPrivateIPv6(words);
  }
  const v4 = parseIPv4(address);
  return v4 === null || isPrivateIPv4(v4);
}
