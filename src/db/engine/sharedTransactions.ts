import type { Sql } from "postgres";
import type { Logger } from "../../log.ts";
import { Coalescer, logRefusedBatch } from "./coalesce.ts";
import { type Db, pipelinedTransaction, refusedByDatabase } from "./connection.ts";
import { shareStatements } from "./gathered.ts";

/**
 * Short transactions of concurrent callers run as one: while one is under way, those that arrive
 * meanwhile go out together on one connection, each one's statements pipelined between a single
 * `begin` and a single `commit`.
 *
 * What a live call's life writes after its placement (the answer, the end LiveKit reports) is a
 * transaction of two or three round trips per call. Under load, each one waited for a pooled
 * connection behind the others, and its commit for its own WAL flush: at 500 calls a second they
 * needed more connection time than the pool had, and the queue grew by seconds (BENCHMARKS.md, "Live
 * phone calls"). Together they share the round trips and the flush.
 *
 * A job must write only through `tx` and leave nothing outside the database that a rollback would
 * make false (an `afterCommit`-style effect belongs after `run` resolves). The batch commits only when
 * every job succeeded: when any failed, it is rolled back (nothing of it is left) and each job runs
 * again alone, so each gets the answer it would have had alone. A commit that failed with the
 * connection (it may have committed) fails every job of it, as any transaction's would.
 *
 * Jobs that share a key (a call's id) never go in the same transaction, so one never runs on
 * another's uncommitted writes of the same row it is fenced on.
 *
 * A shared transaction holds every row lock its jobs took until its last job is done: where jobs
 * update a row they share (an organization's plan minutes, which every call's end updates), keep
 * batches small, or the transactions queue on that row one behind the other.
 */
export class SharedTransactions {
  readonly #jobs: Coalescer<Job, unknown>;

  constructor(sql: Sql, log: Logger, opts: { maxBatch: number; maxInFlight: number; gatherMs?: number }) {
    this.#jobs = new Coalescer<Job, unknown>(
      (job) => pipelinedTransaction(sql, job.fn),
      (jobs) =>
        pipelinedTransaction(sql, async (tx) => {
          // The statements the jobs each send (moves, events, timers, settlements) go out once for all
          // (gathered.ts).
          shareStatements(tx);
          const results = await Promise.allSettled(jobs.map((job) => job.fn(tx)));
          const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
          if (failed) throw new JobFailed(failed.reason);
          return results.map((r) => (r as PromiseFulfilledResult<unknown>).value);
        }),
      {
        maxBatch: opts.maxBatch,
        maxInFlight: opts.maxInFlight,
        gatherMs: opts.gatherMs ?? 0,
        keys: (job) => job.keys,
        // A job's failure rolled the whole batch back before any commit was sent.
        refusedByDatabase: (err) => err instanceof JobFailed || refusedByDatabase(err),
        onRefused: (err, items) => {
          // A job's own failure is its caller's to report, when it fails again alone.
          if (!(err instanceof JobFailed)) logRefusedBatch(log, "shared transaction")(err, items);
        },
      },
    );
  }

  /** Runs `fn` in a transaction, alone or with others; resolves once that transaction committed. */
  run<T>(keys: readonly string[], fn: (tx: Db) => Promise<T>): Promise<T> {
    return this.#jobs.run({ keys, fn }) as Promise<T>;
  }
}

interface Job {
  keys: readonly string[];
  fn: (tx: Db) => Promise<unknown>;
}

/** A job of a shared transaction failed: the transaction is rolled back and each job runs alone. */
class JobFailed extends Error {
  constructor(readonly reason: unknown) {
    super("a job of a shared transaction failed");
  }
}
