import type { Sql } from "postgres";
import { deleteTimer, insertTimer, type NewTimer } from "./store.ts";

export type { NewTimer };

/**
 * The handle services use to create timers: `schedule(tx, …)` writes the row in the caller's
 * transaction, so the timer exists if and only if the change that needs it commits.
 * The running TimerRunner implements it and also keeps timers due soon in its wheel; without a
 * runner in this process (a CLI command, a test that only reads) the row alone is written and any
 * runner on the database fires it.
 */
export interface TimerScheduler {
  schedule(sql: Sql, timer: NewTimer): Promise<{ id: string; dueAt: Date }>;
  cancel(sql: Sql, id: string): Promise<boolean>;
}

export const databaseScheduler: TimerScheduler = {
  async schedule(sql, timer) {
    const held = await insertTimer(sql, timer);
    return { id: held.id, dueAt: new Date(held.dueMs) };
  },
  cancel: (sql, id) => deleteTimer(sql, id),
};

/** The scheduler of the process, or the table alone when no runner was given. */
export function schedulerOf(deps: { timers?: TimerScheduler }): TimerScheduler {
  return deps.timers ?? databaseScheduler;
}
