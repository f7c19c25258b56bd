import type { Context } from "hono";
import type { AppEnv } from "./appEnv.ts";

/**
 * The client address used for per-visitor limits and sent to the bot check (see TRUST_PROXY).
 * It is the socket peer handed over by the runtime adapter. `X-Forwarded-For` is read only when that
 * peer is one of the trusted proxies, and then the right-most address that is not a trusted proxy
 * wins: everything left of it was written by the visitor and proves nothing.
 */

interface Ip {
  version: 4 | 6;
  value: bigint;
}

export interface Cidr {
  version: 4 | 6;
  network: bigint;
  prefix: number;
}

function parseV4(text: string): bigint | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  let value = 0n;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255 || (p.length > 1 && p.startsWith("0"))) return null;
    value = (value << 8n) | BigInt(Number(p));
  }
  return value;
}

function parseV6(input: string): bigint | null {
  let text = input;
  if (text.includes(".")) {
    // Trailing dotted quad, e.g. ::ffff:192.0.2.1
    const i = text.lastIndexOf(":");
    const v4 = parseV4(text.slice(i + 1));
    if (v4 === null) return null;
    text = `${text.slice(0, i + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  if (halves.length === 1 ? head.length !== 8 : head.length + tail.length > 7) return null;
  const groups = [...head, ...Array<string>(8 - head.length - tail.length).fill("0"), ...tail];
  let value = 0n;
  for (const g of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
    value = (value << 16n) | BigInt(Number.parseInt(g, 16));
  }
  return value;
}

const V4_MAPPED = 0xffff00000000n;

/**
 * Parses an address as found in a socket peer or a forwarded header: IPv4, IPv6 (zone and brackets
 * dropped), with an optional port. IPv4-mapped IPv6 (`::ffff:a.b.c.d`) is the IPv4 address.
 */
export function parseIp(raw: string): Ip | null {
  let text = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text);
  if (bracketed) text = bracketed[1]!;
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text);
  if (v4WithPort) text = v4WithPort[1]!;
  const zone = text.indexOf("%");
  if (zone >= 0) text = text.slice(0, zone);
  const v4 = parseV4(text);
  if (v4 !== null) return { version: 4, value: v4 };
  if (!text.includes(":")) return null;
  const v6 = parseV6(text);
  if (v6 === null) return null;
  if (v6 >> 32n === V4_MAPPED >> 32n) return { version: 4, value: v6 & 0xffffffffn };
  return { version: 6, value: v6 };
}

/** The canonical text of an address: dotted IPv4, or RFC 5952 IPv6 (lower case, longest zero run as `::`). */
export function formatIp(ip: Ip): string {
  if (ip.version === 4) {
    return [24n, 16n, 8n, 0n].map((s) => String((ip.value >> s) & 0xffn)).join(".");
  }
  const groups = Array.from({ length: 8 }, (_, i) => Number((ip.value >> BigInt(112 - 16 * i)) & 0xffffn));
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

/** Canonical text of an address, or null when it is not one. */
export function normalizeAddress(raw: string): string | null {
  const ip = parseIp(raw);
  return ip ? formatIp(ip) : null;
}

/**
 * What a per-visitor limit counts: an IPv4 address as itself (IPv4-mapped IPv6 included), an IPv6
 * address by its /64 (`2001:db8:1:2::/64`). One ordinary IPv6 allocation is a whole /64, so counting
 * full IPv6 addresses would give one visitor 2^64 budgets. Anything else (`unknown`) is kept as is.
 */
export function rateLimitKey(address: string): string {
  const ip = parseIp(address);
  if (!ip) return address;
  if (ip.version === 4) return formatIp(ip);
  return `${formatIp({ version: 6, value: (ip.value >> 64n) << 64n })}/64`;
}

/** Parses TRUST_PROXY entries (`10.0.0.0/8`, `fd00::/8`, or a single address). Throws on a bad entry. */
export function parseCidrs(list: readonly string[]): Cidr[] {
  return list.map((entry) => {
    const [addr, bits, extra] = entry.trim().split("/");
    const ip = addr !== undefined && extra === undefined ? parseIp(addr) : null;
    const max = ip?.version === 4 ? 32 : 128;
    const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : Number.NaN;
    if (!ip || !(prefix >= 0 && prefix <= max)) {
      throw new Error(`TRUST_PROXY: "${entry}" is not an address or CIDR such as 10.0.0.0/8 or fd00::/8`);
    }
    const shift = BigInt(max - prefix);
    return { version: ip.version, network: (ip.value >> shift) << shift, prefix };
  });
}

export function inCidrs(ip: Ip, cidrs: readonly Cidr[]): boolean {
  return cidrs.some((c) => {
    if (c.version !== ip.version) return false;
    const shift = BigInt((c.version === 4 ? 32 : 128) - c.prefix);
    return ip.value >> shift === c.network >> shift;
  });
}

/** Used when the runtime gave no peer address (never the case behind Bun.serve). */
export const UNKNOWN_ADDRESS = "unknown";

/** The client address from the socket peer and, only behind a trusted proxy, `X-Forwarded-For`. */
export function resolveClientAddress(
  peer: string | undefined,
  forwardedFor: string | undefined,
  trusted: readonly Cidr[],
): string {
  const peerIp = peer ? parseIp(peer) : null;
  if (!peerIp) return UNKNOWN_ADDRESS;
  if (trusted.length === 0 || !inCidrs(peerIp, trusted) || !forwardedFor) return formatIp(peerIp);
  const hops = forwardedFor
    .split(",")
    .map((h) => h.trim())
    .filter(Boolean);
  let client = peerIp;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = parseIp(hops[i]!);
    // Garbage where an address should be: the nearest proxy we trust is the best we know.
    if (!hop) break;
    client = hop;
    if (!inCidrs(hop, trusted)) break;
  }
  return formatIp(client);
}

/** A resolver for requests, with TRUST_PROXY parsed once (a bad entry fails at start, not per request). */
export function clientAddressResolver(trustProxy: readonly string[]): (c: Context<AppEnv>) => string {
  const trusted = parseCidrs(trustProxy);
  return (c) => resolveClientAddress(c.env?.remoteAddress, c.req.header("x-forwarded-for"), trusted);
}
