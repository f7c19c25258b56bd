import type { Fragment } from "postgres";
import type { Db } from "../db/engine/connection.ts";
import {
  deleteTimer,
  type InsertedTimerRow,
  insertTimer,
  insertTimersFrom,
  type NewTimer,
} from "../db/timers.ts";

export type { InsertedTimerRow, NewTimer };

/**
 * The handle services use to create timers: `schedule(tx, …)` writes the row in the caller's
 * transaction, so the timer exists if and only if the change that needs it commits.
 * The running TimerRunner implements it and also keeps timers due soon in its wheel; without a
 * runner in this process (a CLI command, a test that only reads) the row alone is written and any
 * runner on the database fires it.
 */
export interface TimerScheduler {
  schedule(sql: Db, timer: NewTimer): Promise<{ id: string; dueAt: Date }>;
  /**
   * The same write as the body of a `with` entry, for a statement that creates the timers of the rows
   * it changes: `rows` selects `kind text, due_at timestamptz, payload jsonb`. Hand the entry's rows to
   * `scheduled` once the statement has answered.
   */
  insertFrom(sql: Db, rows: Fragment): Fragment;
  scheduled(rows: readonly InsertedTimerRow[]): void;
  cancel(sql: Db, id: string): Promise<boolean>;
  /**
   * Timers whose `cancel` has committed: the runner forgets them, rather than fire each when it comes
   * due in a transaction that finds no row. Nothing without a runner.
   */
  cancelled(ids: readonly string[]): void;
  /**
   * Timers due now were written behind the scheduler's back (a trigger's): the runner looks for them
   * shortly rather than at its next poll. Nothing without a runner.
   */
  soon(): void;
}

export const databaseScheduler: TimerScheduler = {
  async schedule(sql, timer) {
    const held = await insertTimer(sql, timer);
    return { id: held.id, dueAt: new Date(held.dueMs) };
  },
  insertFrom: (sql, rows) => insertTimersFrom(sql, rows),
  scheduled: () => {},
  cancel: (sql, id) => deleteTimer(sql, id),
  cancelled: () => {},
  soon: () => {},
};

/** The scheduler of the process, or the table alone when no runner was given. */
export function schedulerOf(deps: { timers?: TimerScheduler }): TimerScheduler {
  return deps.timers ?? databaseScheduler;
}
