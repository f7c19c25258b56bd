import { type Db, settledAll } from "../db/engine/connection.ts";
import { type HeldTimer, heldTimers, insertTimers, insertTimersFrom, type TimerLease } from "../db/timers.ts";
import type { BatchTimerHandler } from "./types.ts";

/** What the handlers of a firing leave for after its commit: follow-up timers to arm, work to run. */
export interface AfterBatch {
  followUps: HeldTimer[];
  committed: (() => void)[];
}

/**
 * Runs the handlers of a batch's kinds side by side in `tx`; throws the first failure. The timers
 * they schedule are inserted with `lease`, and those leased go to `after.followUps`: the runner arms
 * them in its wheel only once the transaction has committed.
 */
export async function runHandlers(
  tx: Db,
  handlers: ReadonlyMap<string, BatchTimerHandler>,
  timers: readonly HeldTimer[],
  lease: TimerLease,
  after: AfterBatch,
): Promise<void> {
  const byKind = new Map<string, HeldTimer[]>();
  for (const t of timers) {
    const list = byKind.get(t.kind);
    if (list) list.push(t);
    else byKind.set(t.kind, [t]);
  }
  await settledAll([...byKind].map(([kind, list]) => runHandler(tx, handlers, kind, list, lease, after)));
}

async function runHandler(
  tx: Db,
  handlers: ReadonlyMap<string, BatchTimerHandler>,
  kind: string,
  timers: HeldTimer[],
  lease: TimerLease,
  after: AfterBatch,
): Promise<void> {
  const handler = handlers.get(kind);
  if (!handler) throw new Error(`no handler registered for timer kind "${kind}"`);
  await handler({
    tx,
    timers: timers.map((held) => ({
      id: held.id,
      kind: held.kind,
      payload: held.payload,
      dueAt: new Date(held.dueMs),
      attempts: held.attempts,
    })),
    schedule: async (next) => {
      const rows = await insertTimers(tx, next, lease);
      for (const r of rows) if (r.leased) after.followUps.push(r);
      return rows.map((r) => ({ id: r.id, dueAt: new Date(r.dueMs), payload: r.payload }));
    },
    followUps: (rows) => insertTimersFrom(tx, rows, lease),
    scheduled: (rows) => {
      for (const r of heldTimers(rows)) if (r.leased) after.followUps.push(r);
    },
    afterCommit: (fn) => {
      after.committed.push(fn);
    },
  });
}
