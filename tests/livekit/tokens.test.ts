import { describe, expect, test } from "bun:test";
import { Buffer } from "node:buffer";
import { createHmac } from "node:crypto";
import { AccessToken, TokenVerifier } from "livekit-server-sdk";
import { bodyDigest, CLOCK_TOLERANCE_SECONDS, signToken, verifyToken } from "../../src/livekit/tokens.ts";

const key = { apiKey: "APItokens", apiSecret: "tokens-secret-0123456789-0123456789" };
const nowMs = () => Date.now();
const nowS = () => Math.floor(Date.now() / 1000);

/** A token made by hand: any header, any claims, signed with `secret` (HS256 unless `alg` says). */
function handMade(
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
  secret = key.apiSecret,
  hash = "sha256",
): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const signed = `${part(header)}.${part(claims)}`;
  return `${signed}.${createHmac(hash, secret).update(signed).digest("base64url")}`;
}

const decode = (token: string) => JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString());

describe("signToken", () => {
  test("the claims the SDK's AccessToken signs, verified by the SDK's TokenVerifier", async () => {
    const grants = { video: { roomJoin: true, room: "call_1", canPublish: true, canSubscribe: true } };
    const ours = signToken(key, grants, { ttlSeconds: 180, nowMs: nowMs(), identity: "visitor-call_1" });
    const at = new AccessToken(key.apiKey, key.apiSecret, { identity: "visitor-call_1", ttl: 180 });
    at.addGrant(grants.video);
    const theirs = await at.toJwt();
    const verified = await new TokenVerifier(key.apiKey, key.apiSecret).verify(ours);
    const { exp: _e1, nbf: _n1, ...mine } = verified as Record<string, unknown>;
    const { exp: _e2, nbf: _n2, ...sdk } = decode(theirs);
    expect(mine).toEqual(sdk);
    expect(verified.exp! - verified.nbf!).toBe(180);
    expect(ours.split(".")[0]).toBe(theirs.split(".")[0]!);
  });

  test("a request's grants: video and SIP, no subject", async () => {
    const token = signToken(key, { video: {}, sip: { call: true } }, { ttlSeconds: 600, nowMs: nowMs() });
    const claims = await new TokenVerifier(key.apiKey, key.apiSecret).verify(token);
    expect(claims.sip).toEqual({ call: true });
    expect(claims.sub).toBeUndefined();
    expect(claims.iss).toBe(key.apiKey);
  });
});

describe("verifyToken", () => {
  test("a token of the SDK's, its claims; ours too", async () => {
    const at = new AccessToken(key.apiKey, key.apiSecret, { ttl: "5m" });
    at.sha256 = bodyDigest("{}");
    const claims = verifyToken(key, await at.toJwt(), nowMs());
    expect(claims?.sha256).toBe(bodyDigest("{}"));
    expect(
      verifyToken(key, signToken(key, { video: {} }, { ttlSeconds: 60, nowMs: nowMs() }), nowMs()),
    ).not.toBeNull();
  });

  test("another secret, another issuer, a changed claim or signature: refused", async () => {
    const claims = { iss: key.apiKey, exp: nowS() + 60, nbf: nowS() };
    expect(verifyToken(key, handMade({ alg: "HS256" }, claims), nowMs())).not.toBeNull();
    expect(
      verifyToken(key, handMade({ alg: "HS256" }, claims, "another-secret-0123456789"), nowMs()),
    ).toBeNull();
    expect(verifyToken(key, handMade({ alg: "HS256" }, { ...claims, iss: "APIother" }), nowMs())).toBeNull();
    const [h, , s] = handMade({ alg: "HS256" }, claims).split(".");
    const changed = Buffer.from(JSON.stringify({ ...claims, exp: claims.exp + 3600 })).toString("base64url");
    expect(verifyToken(key, `${h}.${changed}.${s}`, nowMs())).toBeNull();
    const token = handMade({ alg: "HS256" }, claims);
    const flipped = `${token.slice(0, -5)}${token.at(-5) === "A" ? "B" : "A"}${token.slice(-4)}`;
    expect(verifyToken(key, flipped, nowMs())).toBeNull();
    expect(verifyToken(key, `${token}A`, nowMs())).toBeNull();
  });

  test("times: no exp never; exp and nbf within the 10 s of tolerance, not beyond", () => {
    const at = (claims: Record<string, unknown>) =>
      verifyToken(key, handMade({ alg: "HS256" }, { iss: key.apiKey, ...claims }), nowMs()) !== null;
    expect(at({ nbf: nowS() })).toBe(false);
    expect(at({ exp: "soon" })).toBe(false);
    expect(at({ exp: nowS() - CLOCK_TOLERANCE_SECONDS + 3 })).toBe(true);
    expect(at({ exp: nowS() - CLOCK_TOLERANCE_SECONDS - 1 })).toBe(false);
    expect(at({ exp: nowS() + 60, nbf: nowS() + CLOCK_TOLERANCE_SECONDS - 3 })).toBe(true);
    expect(at({ exp: nowS() + 60, nbf: nowS() + CLOCK_TOLERANCE_SECONDS + 2 })).toBe(false);
    expect(at({ exp: nowS() + 60, nbf: "now" })).toBe(false);
  });

  test("signed with the secret but not HS256, or with a critical extension: refused", () => {
    const claims = { iss: key.apiKey, exp: nowS() + 60 };
    expect(verifyToken(key, handMade({ alg: "HS512" }, claims, key.apiSecret, "sha512"), nowMs())).toBeNull();
    // The signature is HS256's, the header claims another algorithm.
    expect(verifyToken(key, handMade({ alg: "HS384" }, claims), nowMs())).toBeNull();
    expect(verifyToken(key, handMade({ alg: "none" }, claims), nowMs())).toBeNull();
    expect(
      verifyToken(key, handMade({ alg: "HS256", crit: ["b64"], b64: false }, claims), nowMs()),
    ).toBeNull();
  });

  test("malformed: parts missing or extra, no JSON, no object", () => {
    const token = handMade({ alg: "HS256" }, { iss: key.apiKey, exp: nowS() + 60 });
    for (const bad of ["", "a.b", `${token}.x`, "not-a-jwt", token.split(".").slice(0, 2).join(".")]) {
      expect(verifyToken(key, bad, nowMs())).toBeNull();
    }
    const sign = (h: string, p: string) =>
      `${h}.${p}.${createHmac("sha256", key.apiSecret).update(`${h}.${p}`).digest("base64url")}`;
    const header = Buffer.from('{"alg":"HS256"}').toString("base64url");
    for (const payload of ["{not json", "[1,2]", "null", '"text"']) {
      expect(verifyToken(key, sign(header, Buffer.from(payload).toString("base64url")), nowMs())).toBeNull();
    }
  });
});

test("bodyDigest: the body's SHA-256 in standard base64, as LiveKit's sha256 claim carries it", () => {
  expect(bodyDigest("")).toBe("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
});
