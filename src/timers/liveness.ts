import type { ReservedSql, Sql } from "postgres";
import { pingRunnerSession, tryLockRunner, unlockRunner } from "../db/timers.ts";

/**
 * How a timer runner proves it is alive: a session advisory lock under a random number (its lease
 * identity), held on a connection it reserves for itself (`reserved`, PostgreSQL) or on the pool's
 * session (`shared`, the embedded database, which is one session for the whole process anyway).
 * Other runners take over the leases of a number whose lock is gone.
 */
export class RunnerLiveness {
  readonly #sql: Sql;
  readonly #mode: "reserved" | "shared";
  #conn: ReservedSql | null = null;
  #runner = 0;

  constructor(sql: Sql, mode: "reserved" | "shared") {
    this.#sql = sql;
    this.#mode = mode;
  }

  /** The lease identity while the lock is held (0 before). */
  get runner(): number {
    return this.#runner;
  }

  async acquire(): Promise<void> {
    const conn = this.#mode === "reserved" ? await this.#sql.reserve() : null;
    const sql = conn ?? this.#sql;
    for (let i = 0; i < 10; i++) {
      const candidate = 1 + Math.floor(Math.random() * 0x7ffffffe);
      if (await tryLockRunner(sql, candidate)) {
        this.#runner = candidate;
        this.#conn = conn;
        return;
      }
    }
    conn?.release();
    throw new Error("timer runner: could not take a liveness lock");
  }

  async release(): Promise<void> {
    const conn = this.#conn;
    this.#conn = null;
    try {
      await unlockRunner(conn ?? this.#sql, this.#runner);
    } finally {
      conn?.release();
    }
  }

  /**
   * Checks that the lock's session still stands. If its connection dropped, the lock is gone: takes a
   * new identity and returns the error (the runner then forgets what it held under the old one).
   */
  async check(): Promise<Error | null> {
    if (!this.#conn) return null;
    try {
      await pingRunnerSession(this.#conn);
      return null;
    } catch (err) {
      this.#conn.release();
      this.#conn = null;
      await this.acquire();
      return err as Error;
    }
  }
}
