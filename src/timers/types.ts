import type { Fragment } from "postgres";
import type { Db } from "../db/engine/connection.ts";
import type { InsertedTimerRow, NewTimer } from "../db/timers.ts";

/**
 * What timer handlers see and are. Services write handlers against these types only; the runner
 * (runner.ts) calls them, and src/timerHandlers.ts says which handler serves which kind.
 */

/** What a handler sees when its timer fires. */
export interface FiredTimer {
  id: string;
  kind: string;
  payload: Record<string, unknown>;
  /** The due time (database clock): the instant the handler's work is scheduled for. */
  dueAt: Date;
  /** Failed attempts so far. */
  attempts: number;
}

export interface HandlerContext {
  /** The transaction the timer's completion commits with. Do all writes through it. */
  tx: Db;
  timer: FiredTimer;
  /** Schedules a follow-up timer in the same transaction. */
  schedule(timer: NewTimer): Promise<{ id: string; dueAt: Date }>;
  /**
   * Runs `fn` once the firing transaction has committed, never if it rolls back: for work outside
   * the database (a request to another service) that must follow only a change that really happened.
   */
  afterCommit(fn: () => void): void;
}

/**
 * A handler is a plain function registered by kind. It must check the state it moves with a fencing
 * condition (`update … where id = $1 and status = $expected`) and do nothing when the state has
 * already moved: in rare takeovers a timer's handler can run twice, but only one run commits a change.
 */
export type TimerHandler = (ctx: HandlerContext) => Promise<void>;

/** What a batch handler sees: every due timer of its kind in one firing transaction. */
export interface BatchContext {
  tx: Db;
  timers: FiredTimer[];
  /**
   * Schedules follow-up timers in the same transaction, in one statement. The answers come in no set
   * order: each carries its timer's payload, to tell which is which.
   */
  schedule(timers: NewTimer[]): Promise<{ id: string; dueAt: Date; payload: Record<string, unknown> }[]>;
  /**
   * The same inside the handler's own statement: the body of a `with` entry inserting timers from
   * `rows` (a select of `kind, due_at, payload`). Pass the rows that entry returns to `scheduled`.
   */
  followUps(rows: Fragment): Fragment;
  scheduled(rows: readonly InsertedTimerRow[]): void;
  /** As in HandlerContext: runs `fn` after the firing transaction commits, never after a rollback. */
  afterCommit(fn: () => void): void;
}

/**
 * A handler that takes all the timers of its kind due together, so it can move many rows with one
 * statement. Same fencing rule as a TimerHandler, per row. If it throws, the runner retries each
 * timer of the batch on its own, so one bad row never holds back the others.
 */
export type BatchTimerHandler = (ctx: BatchContext) => Promise<void>;

/** A handler of one timer as a batch handler: each timer of the batch in turn's own call, side by side. */
export function eachTimer(handler: TimerHandler): BatchTimerHandler {
  return async ({ tx, timers, schedule, afterCommit }) => {
    const results = await Promise.allSettled(
      timers.map((timer) =>
        handler({ tx, timer, schedule: async (t) => (await schedule([t]))[0]!, afterCommit }),
      ),
    );
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
  };
}
