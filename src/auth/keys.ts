import { createHash } from "node:crypto";

/** Key material: generation, hashing and constant-time comparison. Only hashes are ever stored. */

export const KEY_PREFIXES = {
  live: "inf_live_",
  test: "inf_test_",
  publishable: "inf_pub_",
  sessionToken: "inf_wcs_",
} as const;
export type KeyKind = keyof typeof KEY_PREFIXES;

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** 43 base62 characters carry 256 bits, well above the 192 required. */
const SECRET_LENGTH = 43;

/** Uniform base62 by rejection sampling: bytes ≥ 248 are dropped so every character is equally likely. */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    const bytes = crypto.getRandomValues(new Uint8Array(length * 2));
    for (const b of bytes) {
      if (b < 248 && out.length < length) out += BASE62[b % 62];
    }
  }
  return out;
}

export interface NewKey {
  /** The whole key, shown once. */
  key: string;
  /** SHA-256 of the key; the only thing stored. */
  hash: Uint8Array;
  /** A visible prefix for operators, e.g. `inf_live_AbC1…`. */
  start: string;
}

export async function generateKey(kind: KeyKind): Promise<NewKey> {
  const key = `${KEY_PREFIXES[kind]}${randomBase62(SECRET_LENGTH)}`;
  return { key, hash: sha256(key), start: `${key.slice(0, KEY_PREFIXES[kind].length + 4)}…` };
}

/**
 * SHA-256 of the UTF-8 text, synchronously: `node:crypto` (Bun, Deno and Node all have it) hashes a
 * key in ~1 µs, where Web Crypto's `digest` hands each one to another thread and back (~13 µs of the
 * server's time per hash under load, 4 % of it on the web-call routes, which hash up to three per pair).
 */
export function sha256(text: string): Uint8Array {
  // A copy of its own: the digest may be a view into a shared pool, which drivers could send whole.
  return new Uint8Array(createHash("sha256").update(text).digest());
}

/** Constant-time equality of two byte arrays (Web Crypto has no timingSafeEqual). */
export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

/** Which kind a presented key claims to be, from its prefix and shape alone. */
export function keyKind(value: string): KeyKind | null {
  for (const [kind, prefix] of Object.entries(KEY_PREFIXES) as [KeyKind, string][]) {
    if (value.startsWith(prefix) && value.length === prefix.length + SECRET_LENGTH) {
      return /^[0-9A-Za-z]+$/.test(value.slice(prefix.length)) ? kind : null;
    }
  }
  return null;
}
