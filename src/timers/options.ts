import type { Sql } from "postgres";
import type { Logger } from "../log.ts";

/** The settings of a timer runner, and their defaults. */

export interface RunnerOptions {
  sql: Sql;
  log: Logger;
  /**
   * How this runner proves it is alive: a session advisory lock on a connection of its own (`own`,
   * PostgreSQL; timers/liveness.ts), or taken on the pool's session (`shared`, the embedded database,
   * which is one session for the whole process anyway).
   */
  liveness?: "own" | "shared";
  /** How often due and near rows are claimed (ms). */
  pollIntervalMs?: number;
  /** Rows due within this window are claimed into the wheel (ms). Must exceed the poll interval. */
  horizonMs?: number;
  /** Lease length counted from the due time (ms). A live but stuck runner loses its rows after it. */
  leaseMs?: number;
  /** Rows claimed per query. */
  claimBatch?: number;
  /** Most timers held in memory at once; beyond it, claiming pauses. */
  maxHeld?: number;
  /** Timers fired per transaction. */
  batchSize?: number;
  /** Firing transactions in flight at once. */
  concurrency?: number;
  /** Delay before retry n (1-based) of a failed handler. */
  backoff?: (attempt: number) => number;
  /** Attempts before a timer is kept as `failed` (with its last error) instead of retried. */
  maxAttempts?: number;
}

export type ResolvedRunnerOptions = Required<Omit<RunnerOptions, "sql" | "log">>;

/** Retry n waits about 1 s × 2^(n−1), at most 10 minutes, give or take a fifth (so retries spread). */
const defaultBackoff = (attempt: number) => {
  const base = Math.min(1000 * 2 ** (attempt - 1), 10 * 60_000);
  return Math.round(base * (0.8 + Math.random() * 0.4));
};

export function withDefaults(opts: RunnerOptions): ResolvedRunnerOptions {
  return {
    liveness: opts.liveness ?? "own",
    pollIntervalMs: opts.pollIntervalMs ?? 500,
    horizonMs: opts.horizonMs ?? 2000,
    leaseMs: opts.leaseMs ?? 30_000,
    claimBatch: opts.claimBatch ?? 1000,
    maxHeld: opts.maxHeld ?? 50_000,
    batchSize: opts.batchSize ?? 100,
    concurrency: opts.concurrency ?? 2,
    backoff: opts.backoff ?? defaultBackoff,
    maxAttempts: opts.maxAttempts ?? 20,
  };
}
