import { Buffer } from "node:buffer";
import { createHmac } from "node:crypto";
import { type ClaimGrants, claimsToJwtPayload } from "livekit-server-sdk";
import { sha256, timingSafeEqual } from "../auth/keys.ts";

/**
 * LiveKit's access tokens: JWTs signed with HS256 and the API secret, issued by the API key. The same
 * tokens the SDK's AccessToken makes (its claims: the grants, `iss`, `exp`, `nbf`, and `sub` for a
 * participant) and verifies (TokenVerifier: the signature, the issuer, an `exp`, 10 s of clock
 * tolerance), signed and checked with `node:crypto` (Bun, Deno and Node all have it): the SDK's jose
 * imports the secret as a Web Crypto key for every token and hands each signature to another thread
 * and back, 90–130 µs a token under load, where an HMAC here takes 2–4 µs. With a request to LiveKit
 * per step of a call and a webhook per event, that was 7 % of the server's CPU on the phone-call path.
 */

/** How far a token's times may be off the clock (the SDK verifier's default). */
export const CLOCK_TOLERANCE_SECONDS = 10;

/** The one header of every token: LiveKit verifies HS256 only. */
const HEADER = base64url(JSON.stringify({ alg: "HS256" }));

export interface TokenKey {
  apiKey: string;
  apiSecret: string;
}

/**
 * A token carrying `grants` (ClaimGrants: `video`, `sip`, …) for `ttlSeconds` from `nowMs`, for the
 * participant `identity` when given (its `sub`).
 */
export function signToken(
  key: TokenKey,
  grants: ClaimGrants,
  opts: { ttlSeconds: number; nowMs: number; identity?: string },
): string {
  const now = Math.floor(opts.nowMs / 1000);
  const claims: Record<string, unknown> = {
    ...claimsToJwtPayload(grants),
    iss: key.apiKey,
    exp: now + opts.ttlSeconds,
    nbf: now,
  };
  if (opts.identity) claims.sub = opts.identity;
  const signed = `${HEADER}.${base64url(JSON.stringify(claims))}`;
  return `${signed}.${hmac(key.apiSecret, signed).toString("base64url")}`;
}

/**
 * The claims of `token` when the API secret signed it with HS256, the API key issued it, and it is
 * within its times at `nowMs` (give or take the tolerance); else null. A token without `exp` never
 * verifies: it would be valid forever.
 */
export function verifyToken(key: TokenKey, token: string, nowMs: number): ClaimGrants | null {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  const [header, payload, signature] = parts as [string, string, string];
  const expected = hmac(key.apiSecret, `${header}.${payload}`);
  const given = Buffer.from(signature, "base64url");
  // Compared in constant time (a length that differs is no secret).
  if (!timingSafeEqual(given, expected)) return null;
  const head = parseObject(header);
  // Signed with our secret, yet another algorithm or a critical extension we do not know: refused.
  if (head?.alg !== "HS256" || head.crit !== undefined) return null;
  const claims = parseObject(payload);
  if (!claims || claims.iss !== key.apiKey) return null;
  const now = Math.floor(nowMs / 1000);
  if (typeof claims.exp !== "number" || claims.exp <= now - CLOCK_TOLERANCE_SECONDS) return null;
  if (
    claims.nbf !== undefined &&
    (typeof claims.nbf !== "number" || claims.nbf > now + CLOCK_TOLERANCE_SECONDS)
  ) {
    return null;
  }
  return claims as ClaimGrants;
}

/** The SHA-256 of `body` as a webhook token's `sha256` claim carries it (standard base64). */
export function bodyDigest(body: string): string {
  return Buffer.from(sha256(body)).toString("base64");
}

function hmac(secret: string, text: string): Buffer {
  return createHmac("sha256", secret).update(text).digest();
}

function base64url(text: string): string {
  return Buffer.from(text).toString("base64url");
}

/** A JSON object from a base64url part of a token, or null. */
function parseObject(part: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}
