import type { Fragment } from "postgres";
import type { Db } from "./connection.ts";

/**
 * The `updated_at` of a row that a statement changes at `now` (the service's clock): `now`, or one
 * millisecond after the row's previous `updated_at` when `now` is not later. So the changes of one row
 * have strictly increasing times even within a millisecond (or under a clock that stands still), never
 * before the row's creation, and a webhook receiver orders an object's events by them. Set by each
 * statement rather than by a trigger: a trigger would read the database's clock, not the service's,
 * and would cost a function call per row on the statements that move thousands of calls a second.
 * `now` may be a column of the statement's input (each row its own time), `table` the alias of the
 * changed table when the statement reads others.
 */
export function nextUpdatedAt(sql: Db, now: Date | Fragment, table?: string): Fragment {
  const previous = table ? sql.unsafe(`${table}.updated_at`) : sql`updated_at`;
  const at = now instanceof Date ? sql`${now}::timestamptz` : now;
  return sql`greatest(${at}, ${previous} + interval '1 millisecond')`;
}
