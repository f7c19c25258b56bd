import type { Sql } from "postgres";
import { agentAllowed, assertAgentAllowed, type SecretKeyAuth } from "../auth/access.ts";
import { generateKey, KEY_PREFIXES, keyKind, sha256 } from "../auth/keys.ts";
import { toHex } from "../bytes.ts";
import type { Clock } from "../clock.ts";
import { findAgent } from "../db/agents.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import {
  type ClaimedTokenRow,
  claimIdempotencyKey,
  claimToken,
  findIdempotentMint,
  findValidToken,
  insertSessionToken,
  readValidToken,
  type SessionTokenRow,
} from "../db/sessionTokens.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import type { FlatObject } from "../schemas.ts";
import { languageOfVariables } from "../simulation/content.ts";

/**
 * Session tokens: minted with a secret key, single use, valid five minutes, stored only as SHA-256
 * hashes. Redeeming one is an atomic claim (db/sessionTokens.ts), so of any number of parallel
 * redeemers exactly one wins.
 */

export const SESSION_TOKEN_TTL_MS = 5 * 60 * 1000;
/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** 1–255 printable ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x20-\x7E]{1,255}$/;

// ——— the token's format and its derivation ———

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** 32 bytes as exactly 43 base62 characters (62^43 > 2^256), the shape of every key's secret part. */
function base62Of32Bytes(bytes: Uint8Array): string {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  let out = "";
  for (let i = 0; i < 43; i++) {
    out = BASE62[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out;
}

/**
 * The token of an idempotent mint, derived rather than stored: HMAC-SHA256 under the server secret
 * of the scope (organization, mode), the Idempotency-Key and the record's random salt. The salt makes
 * a key reused after its 24 hours yield a new token.
 */
async function deriveSessionToken(
  secret: Uint8Array,
  scope: { organizationId: string; livemode: boolean; idempotencyKey: string; salt: string },
): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    secret as Uint8Array<ArrayBuffer>,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const message = JSON.stringify([
    "session_token",
    scope.organizationId,
    scope.livemode ? "live" : "test",
    scope.idempotencyKey,
    scope.salt,
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(message)));
  return `${KEY_PREFIXES.sessionToken}${base62Of32Bytes(mac)}`;
}

/** SHA-256 of a canonical JSON of the request, to tell a replay from a different request with the same key. */
function requestFingerprint(agentId: string, variables: FlatObject): Uint8Array {
  const sorted = Object.fromEntries(
    Object.keys(variables)
      .sort()
      .map((k) => [k, variables[k]]),
  );
  return sha256(JSON.stringify({ agentId, variables: sorted }));
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** The hash to look a presented token up by, or null when it is not even shaped like a session token. */
export function presentedHash(token: unknown): Uint8Array | null {
  if (typeof token !== "string" || keyKind(token) !== "sessionToken") return null;
  return sha256(token);
}

// ——— minting ———

export interface MintInput {
  agentId: string;
  variables?: FlatObject | undefined;
  idempotencyKey?: string | undefined;
}

export interface MintedSessionToken {
  token: string;
  expiresAt: string;
  livemode: boolean;
  /** True when this answer replays an earlier request with the same Idempotency-Key. */
  replayed: boolean;
}

/**
 * Mints a session token for `auth`. Order: agent exists in the organization (404) → the key may use it
 * (403 agent_not_allowed) → Idempotency-Key replay or conflict (409) → paid plan for a live key (403
 * plan_required) → mint. Plan minutes are checked when the token is used.
 *
 * Without an Idempotency-Key, when neither the key's agents nor its plan refuse, one statement inserts
 * the token if the agent exists (shared with concurrent mints). Otherwise the agent is read first, so
 * that 404 comes before a 403.
 *
 * With an Idempotency-Key everything happens in one transaction that first claims the key's record:
 * concurrent requests with the same key wait on that row and then replay the winner's answer; a
 * refused request rolls back, so only successful answers are kept.
 */
export async function mintSessionToken(
  deps: Deps,
  auth: SecretKeyAuth,
  input: MintInput,
): Promise<MintedSessionToken> {
  const { sql, clock } = deps;
  const variables = input.variables ?? {};
  if (!isId(input.agentId, "agt")) throw noSuchAgent();
  const token = (hash: Uint8Array, now: Date) => ({
    hash,
    organizationId: auth.organizationId,
    livemode: auth.livemode,
    secretKeyId: auth.keyId,
    agentId: input.agentId,
    variables,
    language: languageOfVariables(variables),
    expiresAt: new Date(now.getTime() + SESSION_TOKEN_TTL_MS),
    now,
  });

  if (input.idempotencyKey === undefined && agentAllowed(auth, input.agentId) && mayMint(auth)) {
    // The common case in one statement: nothing is left to refuse but an unknown agent, and an
    // unknown agent inserts nothing.
    const { key, hash } = await generateKey("sessionToken");
    const t = token(hash, clock.now());
    if (!(await deps.batches.sessionTokenInserts.run(t))) throw noSuchAgent();
    return { token: key, expiresAt: t.expiresAt.toISOString(), livemode: auth.livemode, replayed: false };
  }

  // A refusal, or an Idempotency-Key: the agent is read first, so an unknown one is 404 before any 403.
  const agent = await findAgent(sql, auth.organizationId, input.agentId);
  if (!agent) throw noSuchAgent();
  assertAgentAllowed(auth, agent.id);

  // Without an Idempotency-Key only a refusal gets here, and the key may use the agent: no paid plan.
  if (input.idempotencyKey === undefined) throw planRequired();

  const idempotencyKey = input.idempotencyKey;
  const secret = await deps.secrets.get("session_tokens");
  const fingerprint = requestFingerprint(agent.id, variables);
  const salt = toHex(crypto.getRandomValues(new Uint8Array(16)));
  const scope = { organizationId: auth.organizationId, livemode: auth.livemode, idempotencyKey };
  const fresh = await deriveSessionToken(secret, { ...scope, salt });
  const freshHash = sha256(fresh);

  const result = await pipelinedTransaction(sql, async (tx) => {
    const now = clock.now();
    const claimed = await claimIdempotencyKey(tx, {
      ...scope,
      requestHash: fingerprint,
      salt,
      tokenHash: freshHash,
      now,
      staleBefore: new Date(now.getTime() - IDEMPOTENCY_TTL_MS),
    });
    if (claimed) {
      if (!mayMint(auth)) throw planRequired();
      const t = token(freshHash, now);
      await insertSessionToken(tx, t);
      return { token: fresh, expiresAt: t.expiresAt, replayed: false };
    }
    const prior = await findIdempotentMint(tx, scope);
    if (!prior) throw new Error("idempotency record without its session token");
    if (!bytesEqual(prior.requestHash, fingerprint)) {
      throw new ApiError(
        "idempotency_key_reused",
        "This Idempotency-Key was already used with a different request body.",
      );
    }
    const replayedToken = await deriveSessionToken(secret, { ...scope, salt: prior.salt });
    return { token: replayedToken, expiresAt: prior.expiresAt, replayed: true };
  });
  return {
    token: result.token,
    expiresAt: result.expiresAt.toISOString(),
    livemode: auth.livemode,
    replayed: result.replayed,
  };
}

function noSuchAgent(): ApiError {
  return new ApiError("not_found", "No such agent in this organization.", { param: "agentId" });
}

/** Minting with a live key needs a paid plan (as the key's resolution read it). */
function mayMint(auth: SecretKeyAuth): boolean {
  return !auth.livemode || auth.paidPlan;
}

function planRequired(): ApiError {
  return new ApiError(
    "plan_required",
    "Minting session tokens with a live key requires an active paid plan. Test keys need none.",
  );
}

// ——— redemption ———

/** A valid session token, as redemption sees it. */
export interface SessionTokenRecord {
  tokenHash: Uint8Array;
  organizationId: string;
  livemode: boolean;
  secretKeyId: string;
  agentId: string;
  variables: FlatObject;
  expiresAt: Date;
}

/** A claimed token: its record and what the claim read of its agent. */
export interface ClaimedSessionToken extends SessionTokenRecord {
  agent: { active: boolean; language: ClaimedTokenRow["agent_language"] };
}

function record(row: SessionTokenRow): SessionTokenRecord {
  return {
    tokenHash: new Uint8Array(row.token_hash),
    organizationId: row.organization_id,
    livemode: row.livemode,
    secretKeyId: row.secret_key_id,
    agentId: row.agent_id,
    variables: (row.variables ?? {}) as FlatObject,
    expiresAt: row.expires_at,
  };
}

/**
 * Reads a token without spending it: valid means known, unspent, unexpired and minted by a key that
 * is not revoked. Null otherwise (the caller answers 401 `invalid_session_token`).
 */
export async function findSessionToken(
  sql: Db,
  token: unknown,
  clock: Clock,
): Promise<SessionTokenRecord | null> {
  const hash = presentedHash(token);
  const row = hash ? await findValidToken(sql, hash, clock.now()) : null;
  return row ? record(row) : null;
}

/**
 * Atomically claims a valid token (db/sessionTokens.ts `claimSql`). Run it inside the transaction that
 * also reserves minutes and creates the call: rolling that transaction back (a refusal) leaves the token
 * valid; committing it spends the token, and a failure after the commit (starting the call) leaves it
 * spent.
 */
export async function redeemSessionToken(
  tx: Db,
  token: unknown,
  clock: Clock,
  opts: { callId?: string } = {},
): Promise<ClaimedSessionToken | null> {
  const hash = presentedHash(token);
  return hash ? claimed(await claimToken(tx, hash, clock.now(), opts)) : null;
}

function claimed(row: ClaimedTokenRow | null): ClaimedSessionToken | null {
  return row ? { ...record(row), agent: { active: row.agent_active, language: row.agent_language } } : null;
}

/** The refusal for a claim that took nothing, given what `readValidToken` read then (or null). */
export function claimRefusalOf(valid: { livemode: boolean; agent_active: boolean } | null): ApiError {
  return valid && !valid.livemode && !valid.agent_active ? agentUnavailable() : invalidSessionToken();
}

export function invalidSessionToken(): ApiError {
  return new ApiError("invalid_session_token", "The session token is wrong, expired or already used.");
}

export function agentUnavailable(): ApiError {
  return new ApiError("agent_unavailable", "The agent is not available right now.");
}

/**
 * The session form of a web call up to the point of starting it, in one transaction: claim the token
 * (401 if not valid; 503 for a test token whose agent is inactive) → `prepare(tx, session)` runs the
 * remaining checks (paid plan, agent, plan minutes), reserves minutes and creates the call with `tx`. A
 * refusal thrown by `prepare` rolls everything back, so the token stays valid; on return the token is
 * spent. Start the call (LiveKit) after this resolves: a failure there keeps it spent.
 *
 * `prepare` must use `tx` only: the embedded database has a single connection, taken by this transaction.
 */
export async function withRedeemedSessionToken<T>(
  sql: Sql,
  token: unknown,
  clock: Clock,
  prepare: (tx: Db, session: ClaimedSessionToken) => Promise<T>,
  opts: { callId?: string; livemode?: boolean } = {},
): Promise<{ session: ClaimedSessionToken; prepared: T }> {
  const hash = presentedHash(token);
  if (!hash) throw invalidSessionToken();
  return pipelinedTransaction(sql, async (tx) => {
    const now = clock.now();
    const session = claimed(await claimToken(tx, hash, now, opts));
    if (!session) throw claimRefusalOf(await readValidToken(tx, hash, now));
    const prepared = await prepare(tx, session);
    return { session, prepared };
  });
}
