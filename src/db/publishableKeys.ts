import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";
import type { PageInput, PageRequest } from "./engine/pages.ts";

/** Statements of the publishable_keys table. Only the SHA-256 of a key is stored. */

export interface PublishableKeyRow {
  id: string;
  organization_id: string;
  agent_id: string;
  key_hash: Uint8Array;
  start: string;
  allowed_origins: string[];
  monthly_minute_cap: number;
  revoked_at: Date | null;
  created_at: Date;
}

export async function insertPublishableKey(
  sql: Db,
  row: Omit<PublishableKeyRow, "revoked_at">,
): Promise<PublishableKeyRow> {
  const [inserted] = await sql<PublishableKeyRow[]>`
    insert into publishable_keys
      (id, organization_id, agent_id, key_hash, start, allowed_origins, monthly_minute_cap, created_at)
    values (${row.id}, ${row.organization_id}, ${row.agent_id}, ${row.key_hash}, ${row.start},
            ${row.allowed_origins}, ${row.monthly_minute_cap}, ${row.created_at})
    returning *`;
  return inserted!;
}

/** Revokes a key; revoking twice keeps the first time. Null when there is no such key. */
export async function revokePublishableKey(sql: Db, id: string, at: Date): Promise<PublishableKeyRow | null> {
  const [row] = await sql<PublishableKeyRow[]>`
    update publishable_keys set revoked_at = coalesce(revoked_at, ${at}) where id = ${id} returning *`;
  return row ?? null;
}

/** A key that is not revoked, by the hash of its value. */
/** The key whose hash is `hash`, revoked or not (a revoked key's attempts count in its abuse view). */
export async function findPublishableKeyByHash(sql: Db, hash: Uint8Array): Promise<PublishableKeyRow | null> {
  const [row] = await sql<PublishableKeyRow[]>`select * from publishable_keys where key_hash = ${hash}`;
  return row ?? null;
}

/** The monthly cap of a key (0 when there is no such key). */
export async function monthlyMinuteCap(sql: Db, id: string): Promise<number> {
  const [row] = await sql<{ monthly_minute_cap: number }[]>`
    select monthly_minute_cap from publishable_keys where id = ${id}`;
  return row?.monthly_minute_cap ?? 0;
}

/** The scope of an organization's list of publishable keys (index publishable_keys_org_created). */
/** What the operators' list of publishable keys reads: never the hash; last use and this month's minutes. */
export interface PublishableKeyListRow extends Omit<PublishableKeyRow, "key_hash"> {
  last_used_at: Date | null;
  minutes_used: number;
}

/**
 * The key's last use is its latest attempt (the newest day row of its abuse view holds it); its minutes
 * are the month's usage row of its cap. `month` is `YYYY-MM-01`.
 */
export const publishableKeyListColumns = (sql: Db, month: string): Fragment => sql`
  id, organization_id, agent_id, start, allowed_origins, monthly_minute_cap, revoked_at, created_at,
  (select s.last_attempt_at from publishable_key_daily_stats s
    where s.publishable_key_id = publishable_keys.id order by s.day desc limit 1) as last_used_at,
  coalesce((select m.used_minutes from minute_usage m
    where m.kind = 'key' and m.subject_id = publishable_keys.id and m.month = ${month}::date), 0) as minutes_used`;

/**
 * The page of an organization's publishable keys (db/engine/pages.ts), on publishable_keys_org_created;
 * `month` as for `publishableKeyListColumns`.
 */
export function publishableKeysPage(
  sql: Db,
  organizationId: string,
  month: string,
  q: PageInput,
): PageRequest<PublishableKeyListRow> {
  return {
    sql,
    table: "publishable_keys",
    ranges: [{ keys: [["organization_id", organizationId]] }],
    prefix: "key",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: publishableKeyListColumns(sql, month),
  };
}

export async function findPublishableKeyById(sql: Db, id: string): Promise<PublishableKeyRow | null> {
  const [row] = await sql<PublishableKeyRow[]>`select * from publishable_keys where id = ${id}`;
  return row ?? null;
}
