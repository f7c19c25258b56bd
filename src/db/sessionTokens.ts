import type { Fragment } from "postgres";
import { toHex } from "../bytes.ts";
import type { Logger } from "../log.ts";
import { Coalescer, logRefusedBatch, STATEMENT_COALESCING } from "./engine/coalesce.ts";
import { type Db, refusedByDatabase } from "./engine/connection.ts";

/**
 * Statements of session tokens (session_tokens) and of the Idempotency-Keys of their minting
 * (session_idempotency_keys). A token is stored only as its SHA-256 hash.
 */

export type Language = "en" | "fr";

/** A token to write. */
export interface NewSessionToken {
  hash: Uint8Array;
  organizationId: string;
  livemode: boolean;
  secretKeyId: string;
  agentId: string;
  variables: Record<string, unknown>;
  /** The language the variables ask for, or null (the agent's then). */
  language: Language | null;
  expiresAt: Date;
  now: Date;
}

/** Writes a token for an agent of its organization; false (nothing written) when there is no such agent. */
export async function insertSessionToken(sql: Db, t: NewSessionToken): Promise<boolean> {
  const inserted = await sql`
    insert into session_tokens
      (token_hash, organization_id, livemode, secret_key_id, agent_id, variables, language, expires_at, created_at)
    select ${t.hash}, a.organization_id, ${t.livemode}, ${t.secretKeyId}, a.id, ${sql.json(t.variables as never)},
           ${t.language}::text, ${t.expiresAt}, ${t.now}
    from agents a where a.id = ${t.agentId} and a.organization_id = ${t.organizationId}`;
  return inserted.count > 0;
}

/**
 * The same rows as `insertSessionToken`, several to a statement, each only if its agent exists, reported
 * per token. A lone token keeps its own statement, whose kept plan (the agent looked up by key) is right
 * at any table size.
 */
export async function insertSessionTokens(sql: Db, tokens: readonly NewSessionToken[]): Promise<boolean[]> {
  const rows = tokens.map((t) => ({
    hash: toHex(t.hash),
    organization_id: t.organizationId,
    livemode: t.livemode,
    secret_key_id: t.secretKeyId,
    agent_id: t.agentId,
    variables: t.variables,
    language: t.language,
    expires_at: t.expiresAt.toISOString(),
    created_at: t.now.toISOString(),
  }));
  const inserted = await sql<{ token_hash: Uint8Array }[]>`
    insert into session_tokens
      (token_hash, organization_id, livemode, secret_key_id, agent_id, variables, language, expires_at, created_at)
    select decode(r.hash, 'hex'), a.organization_id, r.livemode, r.secret_key_id, a.id, r.variables, r.language,
           r.expires_at, r.created_at
    from batch_rows(${sql.json(rows as never)}::json) e
      cross join lateral json_to_record(e) as r(hash text, organization_id text, livemode boolean,
           secret_key_id text, agent_id text, variables jsonb, language text, expires_at timestamptz,
           created_at timestamptz)
      join agents a on a.id = r.agent_id and a.organization_id = r.organization_id
    returning token_hash`;
  const written = new Set(inserted.map((row) => toHex(new Uint8Array(row.token_hash))));
  return rows.map((r) => written.has(r.hash));
}

/** Mints that arrive together share one insert (engine/coalesce.ts). */
export type SessionTokenInserts = Coalescer<NewSessionToken, boolean>;

export function sessionTokenInserts(sql: Db, log: Logger): SessionTokenInserts {
  return new Coalescer<NewSessionToken, boolean>(
    (t) => insertSessionToken(sql, t),
    (ts) => insertSessionTokens(sql, ts),
    { ...STATEMENT_COALESCING, refusedByDatabase, onRefused: logRefusedBatch(log, "session token inserts") },
  );
}

// ——— Idempotency-Key records ———

export interface IdempotencyClaim {
  organizationId: string;
  livemode: boolean;
  idempotencyKey: string;
  /** SHA-256 of the request, to tell a replay from another request with the same key. */
  requestHash: Uint8Array;
  salt: string;
  tokenHash: Uint8Array;
  now: Date;
  /** A record created at or before this is past its retention and may be taken over. */
  staleBefore: Date;
}

/**
 * Claims an Idempotency-Key: inserts its record, or takes over one older than its retention. True when
 * claimed. A concurrent claim of the same key blocks on the row until the first transaction ends (then
 * sees its record, or claims it after a rollback).
 */
export async function claimIdempotencyKey(tx: Db, c: IdempotencyClaim): Promise<boolean> {
  const rows = await tx`
    insert into session_idempotency_keys
      (organization_id, livemode, idempotency_key, request_hash, salt, token_hash, created_at)
    values (${c.organizationId}, ${c.livemode}, ${c.idempotencyKey}, ${c.requestHash}, ${c.salt},
            ${c.tokenHash}, ${c.now})
    on conflict (organization_id, livemode, idempotency_key) do update set
      request_hash = excluded.request_hash, salt = excluded.salt, token_hash = excluded.token_hash,
      created_at = excluded.created_at
    where session_idempotency_keys.created_at <= ${c.staleBefore}
    returning salt`;
  return rows.length > 0;
}

/** The record of a claimed key with its token's expiry, or null (a record always has its token). */
export async function findIdempotentMint(
  tx: Db,
  scope: { organizationId: string; livemode: boolean; idempotencyKey: string },
): Promise<{ requestHash: Uint8Array; salt: string; expiresAt: Date } | null> {
  const [row] = await tx<{ request_hash: Uint8Array; salt: string; expires_at: Date }[]>`
    select i.request_hash, i.salt, t.expires_at
    from session_idempotency_keys i join session_tokens t on t.token_hash = i.token_hash
    where i.organization_id = ${scope.organizationId} and i.livemode = ${scope.livemode}
      and i.idempotency_key = ${scope.idempotencyKey}`;
  return row
    ? { requestHash: new Uint8Array(row.request_hash), salt: row.salt, expiresAt: row.expires_at }
    : null;
}

// ——— reading and claiming ———

/** A token row as redemption reads it. */
export interface SessionTokenRow {
  token_hash: Uint8Array;
  organization_id: string;
  livemode: boolean;
  secret_key_id: string;
  agent_id: string;
  variables: Record<string, unknown>;
  expires_at: Date;
}

/** What a claim returns: the token, the call id it recorded, and what it read of the agent. */
export interface ClaimedTokenRow extends SessionTokenRow {
  call_id: string | null;
  agent_active: boolean;
  agent_language: Language;
  /** The call's language: the one the variables asked for at mint, else the agent's. */
  language: Language;
}

/** A valid token (known, unspent, unexpired, of a key not revoked), read without claiming it. */
export async function findValidToken(sql: Db, hash: Uint8Array, now: Date): Promise<SessionTokenRow | null> {
  const [row] = await sql<SessionTokenRow[]>`
    select t.token_hash, t.organization_id, t.livemode, t.secret_key_id, t.agent_id, t.variables, t.expires_at
    from session_tokens t join secret_keys k on k.id = t.secret_key_id
    where t.token_hash = ${hash} and t.spent_at is null and t.expires_at > ${now}
      and k.revoked_at is null`;
  return row ?? null;
}

/**
 * A valid token as `(livemode, agent_active)`, read without claiming; null otherwise. After a claim
 * that took nothing it tells why.
 */
export async function readValidToken(
  sql: Db,
  hash: Uint8Array,
  now: Date,
): Promise<{ livemode: boolean; agent_active: boolean } | null> {
  const [row] = await sql<{ livemode: boolean; agent_active: boolean }[]>`
    select t.livemode, a.active as agent_active
    from session_tokens t
      join secret_keys k on k.id = t.secret_key_id
      join agents a on a.id = t.agent_id and a.organization_id = t.organization_id
    where t.token_hash = ${hash} and t.spent_at is null and t.expires_at > ${now} and k.revoked_at is null`;
  return row ?? null;
}

export interface ClaimOptions {
  callId?: string | Fragment;
  /** Only test (false) or live (true) tokens; a test token only when its agent is active. */
  livemode?: boolean;
  /** A further condition the claim needs (for instance the request's rate-limit hit passed). */
  onlyIf?: Fragment;
  /** More relations to join, for a statement claiming several tokens at once. */
  from?: Fragment;
}

/**
 * The claim: one UPDATE that only matches an unspent, unexpired token of a key that is not revoked, so
 * of any number of concurrent redeemers exactly one gets the row. It reads the token's agent too, and
 * takes a test token only when that agent is active (a test call needs nothing else), so an unavailable
 * agent never spends one. As the body of a statement or of a `with` entry, returning a `ClaimedTokenRow`.
 *
 * `hash`, `now` and `callId` are values, or SQL over `opts.from`.
 */
export function claimSql(
  sql: Db,
  hash: Uint8Array | Fragment,
  now: Date | Fragment,
  opts: ClaimOptions,
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
      t.expires_at, t.call_id, a.active as agent_active, a.content_language as agent_language,
      coalesce(t.language, a.content_language) as language`;
}

export async function claimToken(
  tx: Db,
  hash: Uint8Array,
  now: Date,
  opts: Omit<ClaimOptions, "from" | "onlyIf"> & { callId?: string },
): Promise<ClaimedTokenRow | null> {
  const [row] = await tx<ClaimedTokenRow[]>`${claimSql(tx, hash, now, opts)}`;
  return row ?? null;
}

// ——— housekeeping ———

/** Removes idempotency records created at or before `recordsBefore` and tokens expired at or before `tokensBefore`. */
export async function deleteStaleSessionData(
  sql: Db,
  recordsBefore: Date,
  tokensBefore: Date,
): Promise<{ records: number; tokens: number }> {
  const records = await sql`delete from session_idempotency_keys where created_at <= ${recordsBefore}`;
  const tokens = await sql`delete from session_tokens where expires_at <= ${tokensBefore}`;
  return { records: records.count, tokens: tokens.count };
}
