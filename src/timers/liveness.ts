import postgres, { type Sql } from "postgres";
import { runnerLockHeld, tryLockRunner, unlockRunner } from "../db/timers.ts";

/**
 * How a timer runner proves it is alive: a session advisory lock under a random number (its lease
 * identity), held on a session of its own (`own`, PostgreSQL) or on the pool's session
 * (`shared`, the embedded database, which is one session for the whole process anyway). Other
 * runners take over the leases of a number whose lock is gone.
 *
 * On PostgreSQL the session is a client of its own with one connection that the driver never retires,
 * not a connection reserved from the pool: a reserved connection that the database closes (a restart,
 * `pg_terminate_backend`) cannot be used again, and the driver (postgres 3.4.9) fails outside any
 * promise, ending the process, when a statement is sent on it. A client of its own reconnects, and
 * each check asks the database whether this session still holds the lock.
 */
export class RunnerLiveness {
  readonly #sql: Sql;
  readonly #mode: "own" | "shared";
  #session: Sql | null = null;
  #runner = 0;

  constructor(sql: Sql, mode: "own" | "shared") {
    this.#sql = sql;
    this.#mode = mode;
  }

  /** The lease identity while the lock is held (0 before). */
  get runner(): number {
    return this.#runner;
  }

  #lockSession(): Sql {
    if (this.#mode === "shared") return this.#sql;
    this.#session ??= postgres({
      ...this.#sql.options,
      max: 1,
      // Retiring the connection would drop the lock with it.
      max_lifetime: null,
      idle_timeout: null,
    } as unknown as postgres.Options<Record<string, never>>);
    return this.#session;
  }

  async acquire(): Promise<void> {
    const sql = this.#lockSession();
    let taken = false;
    try {
      for (let i = 0; i < 10 && !taken; i++) {
        const candidate = 1 + Math.floor(Math.random() * 0x7ffffffe);
        taken = await tryLockRunner(sql, candidate);
        if (taken) this.#runner = candidate;
      }
      if (!taken) throw new Error("timer runner: could not take a liveness lock");
    } finally {
      // A session that holds no lock is not kept open.
      if (!taken) await this.#endSession();
    }
  }

  /** Closes the session of its own, if any (no lock is held on it any more, or it is lost). */
  async #endSession(): Promise<void> {
    const session = this.#session;
    this.#session = null;
    await session?.end({ timeout: 1 });
  }

  async release(): Promise<void> {
    try {
      await unlockRunner(this.#session ?? this.#sql, this.#runner);
    } finally {
      await this.#endSession();
    }
  }

  /**
   * Checks that the lock's session still stands. If it was lost (its connection dropped; the driver has
   * reconnected since, or cannot), the lock is gone: takes a new identity and returns the error (the
   * runner then forgets what it held under the old one).
   */
  async check(): Promise<Error | null> {
    const session = this.#session;
    if (!session) return null;
    let lost: Error;
    try {
      if (await runnerLockHeld(session, this.#runner)) return null;
      lost = new Error("the liveness lock's session was lost");
    } catch (err) {
      lost = err as Error;
      // The session may still stand (the check itself failed): a new one, so that no lock of the old
      // number is left behind beside the new one.
      await this.#endSession();
    }
    await this.acquire();
    return lost;
  }
}
