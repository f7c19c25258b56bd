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

export function isPrivateIPv4([a, b]: number[]): boolean {
  if (a === undefined || b === undefined) return true;
  return (
    a === 0 || // "this network", 0.0.0.0
    a === 10 ||
    a === 127 ||
    (a === 100 && b >= 64 && b <= 127) || // shared address space (carrier NAT)
    (a === 169 && b === 254) || // link-local, cloud metadata
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0) || // IETF protocol assignments, documentation
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    a >= 224 // multicast, reserved, broadcast
  );
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
 * IPv6 addresses that are not globally routable. Forms that carry an IPv4 address are judged by that
 * address, since traffic to them reaches it: IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated
 * `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::` and Teredo `2001:0:…` (whose
 * client address is the last 32 bits inverted).
 */
export function isPrivateIPv6(w: number[]): boolean {
  const [w0 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0, w5 = 0, w6 = 0, w7 = 0] = w;
  const zeroUntil = (n: number) => w.slice(0, n).every((x) => x === 0);
  const v4 = (hi: number, lo: number) => [hi >> 8, hi & 255, lo >> 8, lo & 255];
  if (zeroUntil(8)) return true; // ::
  if (zeroUntil(7) && w7 === 1) return true; // ::1
  if (zeroUntil(5) && w5 === 0xffff) return isPrivateIPv4(v4(w6, w7)); // ::ffff:a.b.c.d
  if (zeroUntil(4) && w4 === 0xffff && w5 === 0) return isPrivateIPv4(v4(w6, w7)); // ::ffff:0:a.b.c.d
  if (zeroUntil(6)) return true; // deprecated IPv4-compatible ::a.b.c.d
  if (w0 === 0x64 && w1 === 0xff9b) {
    // 64:ff9b::/96 is NAT64 to the embedded address; 64:ff9b:1::/48 is for local networks only.
    return w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0 ? isPrivateIPv4(v4(w6, w7)) : true;
  }
  if (w0 === 0x2002) return isPrivateIPv4(v4(w1, w2)); // 6to4 2002:aabb:ccdd::/48
  if (w0 === 0x2001 && w1 === 0) return isPrivateIPv4(v4(w6 ^ 0xffff, w7 ^ 0xffff)); // Teredo 2001::/32
  return (
    (w0 & 0xfe00) === 0xfc00 || // unique local fc00::/7
    (w0 & 0xffc0) === 0xfe80 || // link-local fe80::/10
    (w0 & 0xffc0) === 0xfec0 || // site-local (deprecated) fec0::/10
    (w0 & 0xff00) === 0xff00 || // multicast
    (w0 === 0x2001 && w1 === 0x0db8) || // documentation
    (w0 === 0x100 && w1 === 0 && w2 === 0 && w3 === 0) // discard-only 100::/64
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
