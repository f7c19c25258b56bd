import type { Fragment } from "postgres";
import { rowOf } from "../ids.ts";
import type { Db } from "./engine/connection.ts";
import type { PageInput, PageRequest } from "./engine/pages.ts";

/** The SQL of the operators' view of work that gave up: timers kept as `failed` (db/timers.ts). */

/** A timer kept as `failed`: its retries ran out (see failTimer in db/timers.ts). */
export interface FailedTimerRow {
  id: string;
  kind: string;
  payload: Record<string, unknown>;
  attempts: number;
  last_error: string | null;
  created_at: Date;
  failed_at: Date | null;
  /** The creation time of the webhook delivery the timer works on, while that delivery exists. */
  delivery_created_at: Date | null;
}

/** `id` as it is (the driver reads bigint as text): a cast named `id` would be what a page orders by. */
export const failedTimerColumns = (sql: Db): Fragment =>
  sql`id, kind, payload, attempts, last_error, created_at, failed_at, ${deliveryCreatedAt(sql)}`;

const deliveryCreatedAt = (sql: Db): Fragment => sql`
  (select d.created_at from webhook_deliveries d
   where timers.payload ? 'deliveryId' and d.id = (timers.payload->>'deliveryId')::bigint) as delivery_created_at`;

/** The page of the operators' list of failed timers (db/engine/pages.ts), on the partial index timers_failed. */
export function failedTimersPage(sql: Db, q: PageInput, rowIdKey: Uint8Array): PageRequest<FailedTimerRow> {
  return {
    sql,
    table: "timers",
    ranges: [{ keys: [], filter: sql`status = 'failed'` }],
    prefix: "tmr",
    limit: q.limit,
    startingAfter: q.starting_after,
    cursorOf: (id) => rowOf(rowIdKey, id, "tmr"),
    columns: failedTimerColumns(sql),
  };
}

/**
 * Puts a failed timer back to work: pending, due now, no attempt counted, free for any runner's next
 * poll. `absent` when there is no such failed timer; `one_pending` when its kind allows one pending
 * timer only (sql/0013) and one is pending already.
 */
export async function retryFailedTimer(
  sql: Db,
  id: string,
): Promise<FailedTimerRow | "absent" | "one_pending"> {
  try {
    const [row] = await sql<FailedTimerRow[]>`
      update timers set status = 'pending', attempts = 0, due_at = now(), failed_at = null,
        locked_by = null, locked_until = null, epoch = epoch + 1
      where id = ${id}::bigint and status = 'failed'
      returning id::text as id, kind, payload, attempts, last_error, created_at, failed_at, ${deliveryCreatedAt(sql)}`;
    return row ?? "absent";
  } catch (err) {
    if ((err as { code?: string }).code === "23505") return "one_pending";
    throw err;
  }
}
