import type { Fragment, Sql } from "postgres";
import { generateKey, KEY_PREFIXES, keyKind, sha256, toHex } from "../auth/keys.ts";
import type { SecretKeyAuth } from "../auth/secretKey.ts";
import { agentAllowed, assertAgentAllowed } from "../auth/secretKey.ts";
import type { Clock } from "../clock.ts";
import type { AgentRow } from "../db/agents.ts";
import { Coalescer, logRefusedBatch, onePer, STATEMENT_COALESCING } from "../db/engine/coalesce.ts";
import { type Db, pipelinedTransaction, refusedByDatabase } from "../db/engine/connection.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import type { Logger } from "../log.ts";
import { type FlatObject, FlatObjectSchema } from "../schemas.ts";
import { languageOfVariables } from "../simulation/content.ts";

/**
 * Session tokens (SPEC.md "Session token", CONTRACT.md §5): minted with a secret key, single use,
 * valid five minutes, stored only as SHA-256 hashes. Redeeming one is an atomic claim, so of any
 * number of parallel redeemers exactly one wins.
 */

export const SESSION_TOKEN_TTL_MS = 5 * 60 * 1000;
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

// ---------------------------------------------------------------------------------------------
// Variables: a flat object kept with the token and handed to the call, never to the browser.

export type FlatVariables = FlatObject;

/** `variables`: a flat object (src/schemas.ts). */
export const VariablesSchema = FlatObjectSchema.openapi({
  description:
    "Flat values kept with the call and passed to the agent; never sent to the browser. At most 50 keys " +
    "of at most 64 characters; values are strings (at most 1,000 characters), numbers, booleans or null.",
  example: { customerName: "Ada", orderId: 1042, vip: true },
});

// ---------------------------------------------------------------------------------------------
// Idempotency-Key

/** 1–255 printable ASCII characters (CONTRACT.md §8). */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x20-\x7E]{1,255}$/;

// ---------------------------------------------------------------------------------------------
// Server secret

const secretCache = new WeakMap<object, Map<string, Promise<Uint8Array>>>();

/**
 * A random 256-bit secret generated once per database and shared by every process using it.
 * The first process to ask creates it; the others read the same row.
 */
export async function serverSecret(sql: Db, name: string): Promise<Uint8Array> {
  let byName = secretCache.get(sql);
  if (!byName) {
    byName = new Map();
    secretCache.set(sql, byName);
  }
  let pending = byName.get(name);
  if (!pending) {
    pending = (async () => {
      const fresh = crypto.getRandomValues(new Uint8Array(32));
      await sql`insert into server_secrets (name, secret) values (${name}, ${fresh}) on conflict (name) do nothing`;
      const [row] = await sql<
        { secret: Uint8Array }[]
      >`select secret from server_secrets where name = ${name}`;
      return new Uint8Array(row!.secret);
    })();
    pending.catch(() => byName?.delete(name));
    byName.set(name, pending);
  }
  return pending;
}

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
function requestFingerprint(agentId: string, variables: FlatVariables): Uint8Array {
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

// ---------------------------------------------------------------------------------------------
// Minting

export interface MintInput {
  agentId: string;
  variables?: FlatVariables | undefined;
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
 * Mints a session token for `auth` (CONTRACT.md §5). Order: agent exists in the organization (404)
 * → the key may use it (403 agent_not_allowed) → Idempotency-Key replay or conflict (409) → paid plan
 * for a live key (403 plan_required) → mint. Plan minutes are checked when the token is used.
 *
 * Without an Idempotency-Key, when neither the key's agents nor its plan refuse, one statement inserts
 * the token if the agent exists. Otherwise the agent is read first, so that 404 comes before a 403.
 *
 * With an Idempotency-Key everything happens in one transaction that first claims the key's record:
 * concurrent requests with the same key wait on that row and then replay the winner's answer; a
 * refused request rolls back, so only successful answers are kept.
 */
export async function mintSessionToken(
  deps: { sql: Sql; clock: Clock; log: Logger },
  auth: SecretKeyAuth,
  input: MintInput,
): Promise<MintedSessionToken> {
  const { sql, clock } = deps;
  const variables = input.variables ?? {};
  if (!isId(input.agentId, "agt")) throw noSuchAgent();

  if (input.idempotencyKey === undefined && agentAllowed(auth, input.agentId) && mayMint(auth)) {
    // The common case in one statement: nothing is left to refuse but an unknown agent, and an
    // unknown agent inserts nothing.
    const { key, hash } = await generateKey("sessionToken");
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + SESSION_TOKEN_TTL_MS);
    const inserted = await tokenInserts(deps).run({
      hash,
      auth,
      agentId: input.agentId,
      variables,
      expiresAt,
      now,
    });
    if (!inserted) throw noSuchAgent();
    await pruneSessionData(sql, clock);
    return { token: key, expiresAt: expiresAt.toISOString(), livemode: auth.livemode, replayed: false };
  }

  // A refusal, or an Idempotency-Key: the agent is read first, so an unknown one is 404 before any 403.
  const [agent] = await sql<{ id: string }[]>`
    select id from agents where id = ${input.agentId} and organization_id = ${auth.organizationId}`;
  if (!agent) throw noSuchAgent();
  assertAgentAllowed(auth, agent.id);

  // Without an Idempotency-Key only a refusal gets here, and the key may use the agent: no paid plan.
  if (input.idempotencyKey === undefined) throw planRequired();

  const idempotencyKey = input.idempotencyKey;
  const secret = await serverSecret(sql, "session_tokens");
  const fingerprint = requestFingerprint(agent.id, variables);
  const salt = toHex(crypto.getRandomValues(new Uint8Array(16)));
  const scope = { organizationId: auth.organizationId, livemode: auth.livemode, idempotencyKey };
  const fresh = await deriveSessionToken(secret, { ...scope, salt });
  const freshHash = sha256(fresh);

  const result = await pipelinedTransaction(sql, async (tx) => {
    const now = clock.now();
    const staleBefore = new Date(now.getTime() - IDEMPOTENCY_TTL_MS);
    // Claims the key: inserts a record, or takes over one older than 24 hours. A concurrent request
    // with the same key blocks here until the first commits (then sees its record) or rolls back.
    const [claimed] = await tx<{ salt: string }[]>`
      insert into session_idempotency_keys
        (organization_id, livemode, idempotency_key, request_hash, salt, token_hash, created_at)
      values (${auth.organizationId}, ${auth.livemode}, ${idempotencyKey}, ${fingerprint}, ${salt},
              ${freshHash}, ${now})
      on conflict (organization_id, livemode, idempotency_key) do update set
        request_hash = excluded.request_hash, salt = excluded.salt, token_hash = excluded.token_hash,
        created_at = excluded.created_at
      where session_idempotency_keys.created_at <= ${staleBefore}
      returning salt`;
    if (claimed) {
      if (!mayMint(auth)) throw planRequired();
      const expiresAt = new Date(now.getTime() + SESSION_TOKEN_TTL_MS);
      await insertSessionToken(tx, { hash: freshHash, auth, agentId: agent.id, variables, expiresAt, now });
      return { token: fresh, expiresAt, replayed: false };
    }
    const [prior] = await tx<{ request_hash: Uint8Array; salt: string; expires_at: Date }[]>`
      select i.request_hash, i.salt, t.expires_at
      from session_idempotency_keys i join session_tokens t on t.token_hash = i.token_hash
      where i.organization_id = ${auth.organizationId} and i.livemode = ${auth.livemode}
        and i.idempotency_key = ${idempotencyKey}`;
    if (!prior) throw new Error("idempotency record without its session token");
    if (!bytesEqual(new Uint8Array(prior.request_hash), fingerprint)) {
      throw new ApiError(
        "idempotency_key_reused",
        "This Idempotency-Key was already used with a different request body.",
      );
    }
    const token = await deriveSessionToken(secret, { ...scope, salt: prior.salt });
    return { token, expiresAt: prior.expires_at, replayed: true };
  });
  if (!result.replayed) await pruneSessionData(sql, clock);
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

interface NewSessionToken {
  hash: Uint8Array;
  auth: SecretKeyAuth;
  agentId: string;
  variables: FlatVariables;
  expiresAt: Date;
  now: Date;
}

/** Writes a token for an agent of the key's organization; false (nothing written) when there is no such agent. */
async function insertSessionToken(sql: Db, t: NewSessionToken): Promise<boolean> {
  const inserted = await sql`
    insert into session_tokens
      (token_hash, organization_id, livemode, secret_key_id, agent_id, variables, language, expires_at, created_at)
    select ${t.hash}, a.organization_id, ${t.auth.livemode}, ${t.auth.keyId}, a.id, ${sql.json(t.variables)},
           ${languageOfVariables(t.variables)}::text, ${t.expiresAt}, ${t.now}
    from agents a where a.id = ${t.agentId} and a.organization_id = ${t.auth.organizationId}`;
  return inserted.count > 0;
}

/**
 * Tokens written several to a statement when mints arrive together (db/coalesce.ts): the same rows
 * `insertSessionToken` writes, each only if its agent exists, reported per token. A lone mint keeps
 * its own statement, whose kept plan (the agent looked up by key) is right at any table size.
 */
async function insertSessionTokens(sql: Db, tokens: NewSessionToken[]): Promise<boolean[]> {
  const rows = tokens.map((t) => ({
    hash: toHex(t.hash),
    organization_id: t.auth.organizationId,
    livemode: t.auth.livemode,
    secret_key_id: t.auth.keyId,
    agent_id: t.agentId,
    variables: t.variables,
    language: languageOfVariables(t.variables),
    expires_at: t.expiresAt.toISOString(),
    created_at: t.now.toISOString(),
  }));
  const inserted = await sql<{ token_hash: Uint8Array }[]>`
    insert into session_tokens
      (token_hash, organization_id, livemode, secret_key_id, agent_id, variables, language, expires_at, created_at)
    select decode(r.hash, 'hex'), a.organization_id, r.livemode, r.secret_key_id, a.id, r.variables, r.language,
           r.expires_at, r.created_at
    from batch_rows(${sql.json(rows)}::json) e
      cross join lateral json_to_record(e) as r(hash text, organization_id text, livemode boolean,
           secret_key_id text, agent_id text, variables jsonb, language text, expires_at timestamptz,
           created_at timestamptz)
      join agents a on a.id = r.agent_id and a.organization_id = r.organization_id
    returning token_hash`;
  const written = new Set(inserted.map((row) => toHex(new Uint8Array(row.token_hash))));
  return rows.map((r) => written.has(r.hash));
}

const tokenInserts = onePer(
  ({ sql, log }: { sql: Sql; log: Logger }) =>
    new Coalescer<NewSessionToken, boolean>(
      (t) => insertSessionToken(sql, t),
      (ts) => insertSessionTokens(sql, ts),
      {
        ...STATEMENT_COALESCING,
        refusedByDatabase,
        onRefused: logRefusedBatch(log, "session token inserts"),
      },
    ),
);

// ---------------------------------------------------------------------------------------------
// Redemption

/** A valid session token, as redemption sees it. */
export interface SessionTokenRecord {
  tokenHash: Uint8Array;
  organizationId: string;
  livemode: boolean;
  secretKeyId: string;
  agentId: string;
  variables: FlatVariables;
  expiresAt: Date;
}

interface TokenRow {
  token_hash: Uint8Array;
  organization_id: string;
  livemode: boolean;
  secret_key_id: string;
  agent_id: string;
  variables: FlatVariables;
  expires_at: Date;
}

function record(row: TokenRow): SessionTokenRecord {
  return {
    tokenHash: new Uint8Array(row.token_hash),
    organizationId: row.organization_id,
    livemode: row.livemode,
    secretKeyId: row.secret_key_id,
    agentId: row.agent_id,
    variables: row.variables ?? {},
    expiresAt: row.expires_at,
  };
}

/** The hash to look a presented token up by, or null when it is not even shaped like a session token. */
export function presentedHash(token: unknown): Uint8Array | null {
  if (typeof token !== "string" || keyKind(token) !== "sessionToken") return null;
  return sha256(token);
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
  if (!hash) return null;
  const [row] = await sql<TokenRow[]>`
    select t.token_hash, t.organization_id, t.livemode, t.secret_key_id, t.agent_id, t.variables, t.expires_at
    from session_tokens t join secret_keys k on k.id = t.secret_key_id
    where t.token_hash = ${hash} and t.spent_at is null and t.expires_at > ${clock.now()}
      and k.revoked_at is null`;
  return row ? record(row) : null;
}

/** A claimed token: its record and what the claim read of its agent. */
export interface ClaimedSessionToken extends SessionTokenRecord {
  agent: { active: boolean; language: AgentRow["language"] };
}

interface ClaimRow extends TokenRow {
  agent_active: boolean;
  agent_language: AgentRow["language"];
  language: AgentRow["language"];
}

/**
 * Atomically claims a valid token: one UPDATE that only matches an unspent, unexpired token of a
 * non-revoked key, so of any number of concurrent redeemers exactly one gets the record and the others
 * get null. The same UPDATE reads the token's agent, and takes a test token only when that agent is
 * active (a test call needs nothing else), so an unavailable agent never spends one. Run it inside
 * the transaction that also reserves minutes and creates the call: rolling that transaction back (a
 * refusal) leaves the token valid; committing it spends the token, and a failure after the commit
 * (starting the call) leaves it spent.
 */
export async function redeemSessionToken(
  tx: Db,
  token: unknown,
  clock: Clock,
  opts: { callId?: string } = {},
): Promise<ClaimedSessionToken | null> {
  const hash = presentedHash(token);
  return hash ? claimSessionToken(tx, hash, clock.now(), opts) : null;
}

async function claimSessionToken(
  tx: Db,
  hash: Uint8Array,
  now: Date,
  opts: { callId?: string; livemode?: boolean },
): Promise<ClaimedSessionToken | null> {
  const [row] = await tx<ClaimRow[]>`${claimSql(tx, hash, now, opts)}`;
  return row ? { ...record(row), agent: { active: row.agent_active, language: row.agent_language } } : null;
}

/**
 * The claim as the body of a statement or of a `with` entry, returning a `ClaimRow` (and `language`,
 * the call's: the one the variables asked for at mint, else the agent's; and `call_id`). `livemode`
 * narrows it to test or live tokens; a test token is taken only when its agent is active, a live one
 * whatever its agent (checked after the claim, in order with the plan).
 *
 * `hash`, `now` and `callId` are values, or SQL over `opts.from`: a statement claiming several
 * tokens joins its rows there (services/webCalls.ts).
 */
export function claimSql(
  sql: Db,
  hash: Uint8Array | Fragment,
  now: Date | Fragment,
  opts: { callId?: string | Fragment; livemode?: boolean; onlyIf?: Fragment; from?: Fragment },
): Fragment {
  const mode =
    opts.livemode === undefined
      ? sql`(t.livemode or a.active)`
      : opts.livemode
        ? sql`t.livemode`
        : sql`not t.livemode and a.active`;
  return sql`
    update session_tokens t set spent_at = ${now}, call_id = ${opts.callId ?? null}
    from secret_keys k, agents a ${opts.from ? sql`, ${opts.from}` : sql``}
    where t.token_hash = ${hash} and t.spent_at is null and t.expires_at > ${now}
      and k.id = t.secret_key_id and k.revoked_at is null
      and a.id = t.agent_id and a.organization_id = t.organization_id and ${mode}
      and ${opts.onlyIf ?? sql`true`}
    returning t.token_hash, t.organization_id, t.livemode, t.secret_key_id, t.agent_id, t.variables,
      t.expires_at, t.call_id, a.active as agent_active, a.language as agent_language,
      coalesce(t.language, a.language) as language`;
}

/**
 * A valid token (known, unspent, unexpired, of a key not revoked) as `(livemode, agent_active)`, read
 * without claiming; undefined otherwise. After a claim that took nothing it tells why: a valid test
 * token whose agent is inactive is 503, a valid live one goes on to the live path (test tokens, see
 * services/webCalls.ts), anything else is 401.
 */
export async function readValidToken(
  sql: Db,
  hash: Uint8Array,
  now: Date,
): Promise<{ livemode: boolean; agent_active: boolean } | undefined> {
  const [row] = await sql<{ livemode: boolean; agent_active: boolean }[]>`
    select t.livemode, a.active as agent_active
    from session_tokens t
      join secret_keys k on k.id = t.secret_key_id
      join agents a on a.id = t.agent_id and a.organization_id = t.organization_id
    where t.token_hash = ${hash} and t.spent_at is null and t.expires_at > ${now} and k.revoked_at is null`;
  return row;
}

/** The refusal for a claim that took nothing, given what `readValidToken` read then (or undefined). */
export function claimRefusalOf(valid: { livemode: boolean; agent_active: boolean } | undefined): ApiError {
  return valid && !valid.livemode && !valid.agent_active ? agentUnavailable() : invalidSessionToken();
}

async function claimRefusal(tx: Db, hash: Uint8Array, now: Date): Promise<ApiError> {
  return claimRefusalOf(await readValidToken(tx, hash, now));
}

export function invalidSessionToken(): ApiError {
  return new ApiError("invalid_session_token", "The session token is wrong, expired or already used.");
}

function agentUnavailable(): ApiError {
  return new ApiError("agent_unavailable", "The agent is not available right now.");
}

/**
 * The session form of a web call up to the point of starting it, in one transaction:
 * claim the token (401 if not valid; 503 for a test token whose agent is inactive) → `prepare(tx,
 * session)` runs the remaining checks in the order of CONTRACT.md §4 (paid plan, agent, plan minutes)
 * and reserves minutes and creates the call with `tx`. A refusal thrown by `prepare` rolls everything
 * back, so the token stays valid; on return the token is spent. Start the call (LiveKit) after this
 * resolves: a failure there keeps it spent.
 *
 * `begin` goes out with the claim (db/connection.ts `pipelinedTransaction`). `prepare` must use `tx`
 * only: the embedded database has a single connection, taken by this transaction.
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
    const session = await claimSessionToken(tx, hash, now, opts);
    if (!session) throw await claimRefusal(tx, hash, now);
    const prepared = await prepare(tx, session);
    return { session, prepared };
  });
}

/**
 * The agent of a web call, or 503 `agent_unavailable`: unknown, inactive, or (for a live call) no media
 * server configured.
 */
export async function assertAgentAvailable(
  sql: Db,
  organizationId: string,
  agentId: string,
  opts: { livemode: boolean; mediaServerConfigured: boolean },
): Promise<AgentRow> {
  const [agent] = await sql<AgentRow[]>`
    select * from agents where id = ${agentId} and organization_id = ${organizationId}`;
  if (!agent?.active || (opts.livemode && !opts.mediaServerConfigured)) throw agentUnavailable();
  return agent;
}

/** 403 `plan_required` unless the organization has an active paid plan (read now, not from the key). */
export async function assertPaidPlan(sql: Db, organizationId: string): Promise<void> {
  const [org] = await sql<{ paid_plan: boolean }[]>`
    select paid_plan from organizations where id = ${organizationId}`;
  if (!org?.paid_plan) throw new ApiError("plan_required", "The organization has no active paid plan.");
}

// ---------------------------------------------------------------------------------------------
// Housekeeping

const lastPrune = new WeakMap<object, number>();
const PRUNE_EVERY_MS = 10 * 60 * 1000;

/**
 * Removes idempotency records past their 24 hours and session tokens past expiry by more than that
 * (a replay may still need a token row until its record expires). Runs at most every ten minutes per
 * process and never fails the request that triggered it.
 */
export async function pruneSessionData(sql: Db, clock: Clock, force = false): Promise<void> {
  const now = clock.now().getTime();
  if (!force && now - (lastPrune.get(sql) ?? 0) < PRUNE_EVERY_MS) return;
  lastPrune.set(sql, now);
  const staleRecords = new Date(now - IDEMPOTENCY_TTL_MS);
  const staleTokens = new Date(now - IDEMPOTENCY_TTL_MS - SESSION_TOKEN_TTL_MS);
  try {
    await sql`delete from session_idempotency_keys where created_at <= ${staleRecords}`;
    await sql`delete from session_tokens where expires_at <= ${staleTokens}`;
  } catch {
    // Housekeeping only: the next mint tries again.
  }
}
