import type { Db } from "./engine/connection.ts";
import type { IndexKey, PageInput, PageRequest } from "./engine/pages.ts";

/** Statements of the do-not-call list (blocked_numbers). */

export interface BlockedNumberRow {
  id: string;
  organization_id: string;
  livemode: boolean;
  phone: string;
  reason: string | null;
  created_at: Date;
}

/**
 * Lists `phone` in the organization's list of that mode, or finds the entry that already lists it
 * (left unchanged), in one statement: concurrent requests for one number all get the one entry.
 * `created` tells which happened.
 */
export async function upsertBlockedNumber(
  sql: Db,
  row: BlockedNumberRow,
): Promise<{ row: BlockedNumberRow; created: boolean }> {
  // `do update` (not `do nothing`) so that the existing row is returned; `xmax = 0` only for a new row.
  const [r] = await sql<(BlockedNumberRow & { created: boolean })[]>`
    insert into blocked_numbers as b (id, organization_id, livemode, phone, reason, created_at)
    values (${row.id}, ${row.organization_id}, ${row.livemode}, ${row.phone}, ${row.reason}, ${row.created_at})
    on conflict (organization_id, livemode, phone) do update set phone = b.phone
    returning b.*, (b.xmax = 0) as created`;
  const { created, ...entry } = r!;
  return { row: entry, created };
}

/** Removes an entry of the organization in that mode; false when there is none. */
export async function deleteBlockedNumber(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  id: string,
): Promise<boolean> {
  const rows = await sql`
    delete from blocked_numbers
    where id = ${id} and organization_id = ${scope.organizationId} and livemode = ${scope.livemode}
    returning id`;
  return rows.length === 1;
}

/**
 * The page of a blocked numbers list (db/engine/pages.ts), on (organization_id, livemode, created_at
 * desc, id desc); filtered by `phone`, on the unique (organization_id, livemode, phone): one row at most,
 * which the planner knows whatever the statistics, so the range is not pinned (db/engine/pages.ts).
 */
export function blockedNumbersPage(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  q: PageInput & { phone?: string | undefined },
): PageRequest<BlockedNumberRow> {
  const keys: IndexKey[] = [
    ["organization_id", scope.organizationId],
    ["livemode", scope.livemode],
    ...(q.phone !== undefined ? [["phone", q.phone] as const] : []),
  ];
  return {
    sql,
    table: "blocked_numbers",
    ranges: [{ keys }],
    prefix: "bn",
    limit: q.limit,
    startingAfter: q.starting_after,
  };
}
