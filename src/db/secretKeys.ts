import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";
import type { PageInput, PageRequest } from "./engine/pages.ts";

/** Statements of the secret_keys table. Only the SHA-256 of a key is stored. */

export interface SecretKeyRow {
  id: string;
  organization_id: string;
  mode: "live" | "test";
  key_hash: Uint8Array;
  start: string;
  scopes: string[];
  agent_ids: string[] | null;
  revoked_at: Date | null;
  created_at: Date;
}

export async function insertSecretKey(sql: Db, row: Omit<SecretKeyRow, "revoked_at">): Promise<SecretKeyRow> {
  const [inserted] = await sql<SecretKeyRow[]>`
    insert into secret_keys (id, organization_id, mode, key_hash, start, scopes, agent_ids, created_at)
    values (${row.id}, ${row.organization_id}, ${row.mode}, ${row.key_hash}, ${row.start}, ${row.scopes},
            ${row.agent_ids}, ${row.created_at})
    returning *`;
  return inserted!;
}

/** Revokes a key; revoking twice keeps the first time. Null when there is no such key. */
export async function revokeSecretKey(sql: Db, id: string, at: Date): Promise<SecretKeyRow | null> {
  const [row] = await sql<SecretKeyRow[]>`
    update secret_keys set revoked_at = coalesce(revoked_at, ${at}) where id = ${id} returning *`;
  return row ?? null;
}

/** A key by the hash of its value, with its organization's paid plan (what a request needs). */
export async function findSecretKeyByHash(
  sql: Db,
  hash: Uint8Array,
): Promise<(SecretKeyRow & { paid_plan: boolean }) | null> {
  const [row] = await sql<(SecretKeyRow & { paid_plan: boolean })[]>`
    select k.*, o.paid_plan
    from secret_keys k join organizations o on o.id = k.organization_id
    where k.key_hash = ${hash}`;
  return row ?? null;
}

/**
 * The oldest test key of an organization, not revoked, that may mint session tokens for `agentId`
 * (scope `webcalls:write`, no restriction excluding the agent).
 */
export async function findMintingTestKey(
  sql: Db,
  organizationId: string,
  agentId: string,
): Promise<SecretKeyRow | null> {
  const [row] = await sql<SecretKeyRow[]>`
    select * from secret_keys
    where organization_id = ${organizationId} and mode = 'test' and revoked_at is null
      and ('*' = any(scopes) or 'webcalls:write' = any(scopes))
      and (agent_ids is null or ${agentId} = any(agent_ids))
    order by created_at, id
    limit 1`;
  return row ?? null;
}

/** The scope of an organization's list of secret keys (index secret_keys_org_created). */
/** What the operators' list of secret keys reads: never the hash; with the key's last use. */
export interface SecretKeyListRow extends Omit<SecretKeyRow, "key_hash"> {
  last_used_at: Date | null;
}

export const secretKeyListColumns = (sql: Db): Fragment => sql`
  id, organization_id, mode, start, scopes, agent_ids, revoked_at, created_at,
  (select u.last_used_at from secret_key_usage u where u.key_id = secret_keys.id) as last_used_at`;

/** The page of an organization's secret keys (db/engine/pages.ts), on secret_keys_org_created. */
export function secretKeysPage(sql: Db, organizationId: string, q: PageInput): PageRequest<SecretKeyListRow> {
  return {
    sql,
    table: "secret_keys",
    ranges: [{ keys: [["organization_id", organizationId]] }],
    prefix: "key",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: secretKeyListColumns(sql),
  };
}
