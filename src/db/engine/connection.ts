import postgres, { type Sql, type TransactionSql } from "postgres";
import type { Logger } from "../../log.ts";
import type { PgliteFiles } from "../../runtime/runtime.ts";
import { openEmbedded } from "./embedded.ts";

/**
 * Whether `err` is the database's refusal of a statement (an error answer, after which an autocommit
 * statement has left nothing behind), rather than a failure of the connection or of the driver.
 */
export function refusedByDatabase(err: unknown): boolean {
  return err instanceof postgres.PostgresError;
}

/** Queries that run either on the pool or inside a transaction (`pipelinedTransaction`). */
export type Db = Sql | TransactionSql;

/** PostgreSQL's refusal of a statement sent after another one failed in the same transaction. */
function inAbortedTransaction(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === "25P02";
}

/** Waits for every promise, then throws the first failure, if any; else returns their values. */
export async function settledAll<T extends readonly unknown[]>(
  promises: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T> {
  const results = await Promise.allSettled(promises);
  const rejected = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
  // The first failure in the order given; but in a transaction a statement that failed aborts every one
  // sent after it (25P02, "current transaction is aborted"): the cause is the one that did not say so.
  const failed = rejected.find((r) => !inAbortedTransaction(r.reason)) ?? rejected[0];
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/**
 * A transaction on a connection of its own, whose `begin` goes out together with the first statement
 * of `fn` (`sql.begin` waits for `begin` alone before running its callback): a round trip fewer.
 * Commits once every statement of `fn` has answered, rolls back when anything fails. The commit is
 * never sent ahead of those answers: a statement that fails in the driver before reaching the server
 * would otherwise leave a commit of the rest. Like `sql.begin`, it takes the embedded database's only
 * connection: `fn` must use `tx` only. postgres.js pipelines only statements the connection has
 * already prepared: the first use of a statement on a connection waits for its description.
 *
 * A connection the database closes during the transaction (a restart, `pg_terminate_backend`, a
 * reset) has rolled it back. Nothing more goes out on it: postgres 3.4.9 fails outside any promise,
 * ending the process, when a statement is sent on a reserved connection it has closed, and once it has
 * reconnected that connection for the pool, a statement of `fn` would run on the new session, outside
 * any transaction. So the close is watched (the driver calls the connection's `onclose`), `fn`'s later
 * statements and the commit are refused with `CONNECTION_CLOSED`, and the connection is not released:
 * the driver has already put it back among the pool's closed connections, which it reconnects when
 * needed.
 *
 * `end.last(statement)` makes `statement` the transaction's last one and sends the commit right behind
 * it, in the same round trip, rather than once it has answered (a round trip fewer, and the locks held
 * for one less; BENCHMARKS.md, "the commit behind the writes"). The database rolls back instead when
 * the statement fails there (a commit in a failed transaction is a rollback). The driver's own failure
 * to send it would let the commit keep what came before it, so `last` is for a transaction whose
 * every write is that one statement, or whose earlier ones may be committed alone (locks, reads, the
 * creation of a row that any transaction would create the same). Nothing may be sent after it, and what
 * `fn` does once it has answered runs after the commit: it should not fail.
 */
export async function pipelinedTransaction<T>(
  sql: Sql,
  fn: (tx: Db, end: TransactionEnd) => Promise<T>,
): Promise<T> {
  const conn = await sql.reserve();
  let lost = false;
  let watched: { onclose?: (() => void) | null } | null = null;
  const watchClose = (c: { onclose?: (() => void) | null }) => {
    watched = c;
    c.onclose = () => {
      lost = true;
    };
    return true;
  };
  // The commit sent behind `end.last`'s statement, once it is.
  let commit: Promise<unknown> | null = null;
  const refuseIfLost = () => {
    if (lost) throw lostConnection();
    if (commit) throw new Error("a statement after the transaction's last one");
  };
  const end: TransactionEnd = {
    last: (statement) => {
      refuseIfLost();
      const answer = statement.execute();
      commit = conn`commit`.execute();
      commit.catch(() => {});
      return answer;
    },
  };
  try {
    // Both are awaited, so nothing of fn is still running on the connection when it is rolled back
    // and released.
    const begin = conn.unsafe("begin", [], { onexecute: watchClose } as postgres.UnsafeQueryOptions);
    const [, value] = await settledAll([begin.execute(), fn(guarded(conn, refuseIfLost), end)]);
    if (commit) await commit;
    else {
      refuseIfLost();
      await conn`commit`;
    }
    return value;
  } catch (err) {
    lost ||= connectionLost(err);
    // A commit already sent answers first (a rollback, when its statement failed there).
    if (commit) await (commit as Promise<unknown>).catch(() => {});
    if (!lost) await conn`rollback`.catch(() => {});
    throw err;
  } finally {
    if (!lost) {
      // The watch ends with the transaction (the next one to reserve the connection sets its own).
      if (watched) (watched as { onclose?: (() => void) | null }).onclose = null;
      conn.release();
    }
  }
}

/** How a transaction sends its last statement with the commit (`pipelinedTransaction`). */
export interface TransactionEnd {
  last<T extends readonly postgres.MaybeRow[]>(
    statement: postgres.PendingQuery<T>,
  ): Promise<postgres.RowList<T>>;
}

function lostConnection(): Error {
  return Object.assign(new Error("the database connection was lost during the transaction"), {
    code: "CONNECTION_CLOSED",
  });
}

/** `conn` for `fn`: every statement it starts (a tagged template, `unsafe`) first asks `check`. */
function guarded(conn: postgres.ReservedSql, check: () => void): Db {
  return new Proxy(conn, {
    apply(target, self, args) {
      check();
      return Reflect.apply(target, self, args);
    },
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop !== "unsafe" || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        check();
        return Reflect.apply(value, target, args);
      };
    },
  });
}

/** The driver's codes for a connection that is gone. */
const LOST_CONNECTION_CODES = new Set(["CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED"]);

/**
 * Whether `err` says the connection is gone: the driver's own errors for it, the socket's (a reset,
 * a broken pipe, a timeout: Node's errors carry `syscall` or `errno`), or the server's FATAL or PANIC,
 * after which it closes the session.
 */
export function connectionLost(err: unknown): boolean {
  if (!err || typeof err !== "object") return false;
  const e = err as { code?: unknown; severity?: unknown; syscall?: unknown; errno?: unknown };
  if (err instanceof postgres.PostgresError) return e.severity === "FATAL" || e.severity === "PANIC";
  if (typeof e.code === "string" && LOST_CONNECTION_CODES.has(e.code)) return true;
  return typeof e.code === "string" && (e.syscall !== undefined || e.errno !== undefined);
}

export interface Database {
  sql: Sql;
  kind: "postgres" | "embedded";
  close(): Promise<void>;
}

export interface OpenOptions {
  /** PostgreSQL URL; without it an embedded database is opened in dataDir. */
  url?: string;
  dataDir: string;
  log: Logger;
  /** Pool size for PostgreSQL (the embedded database always gets exactly one connection). */
  max?: number;
  /** The runtime's PGlite engine files: needed without `url` (main.ts passes its runtime's). */
  pglite?: PgliteFiles;
}

/**
 * Connections of the request pool on PostgreSQL: about two per core. More do not make more work
 * happen (the server's CPU is the limit on a small machine); they only lengthen every backend's wait
 * for a core, and with it the timers' transactions, which run on their own small pool. Measured on
 * 2 cores: 10 connections gave the simulated-call benchmark a lateness p99 of 70–110 ms, 4 gave
 * 34–42 ms (BENCHMARKS.md).
 */
export const REQUEST_POOL_SIZE = Math.max(4, 2 * (globalThis.navigator?.hardwareConcurrency || 2));

/**
 * A Date parameter as the driver sends it, except that an invalid one goes as text PostgreSQL refuses
 * (an ordinary error of that statement) rather than throwing while the driver builds the message: a
 * throw there, behind another statement of a pipelined transaction, leaves the statement unanswered
 * for ever and hands its error to the statement before it (postgres.js 3.4), holding the connection.
 */
function serializeDate(x: unknown): string {
  const d = x instanceof Date ? x : new Date(x as string);
  return Number.isNaN(d.getTime()) ? "invalid date" : d.toISOString();
}

/** Options shared by both modes: one driver, one configuration. */
export const driverOptions = {
  onnotice: () => {},
  // Our numeric columns are int4; timestamps come back as Date.
  types: {
    date: { to: 1184, from: [1082, 1114, 1184], serialize: serializeDate, parse: (x: string) => new Date(x) },
  },
};

/**
 * Session settings of every connection to PostgreSQL. No JIT compilation: the service's statements
 * read a handful of rows by index, and one whose estimate is inflated (a planner setting that prices a
 * sort out of reach, `batch_rows` over a large table, a stale estimate) crosses `jit_above_cost` and is
 * compiled to machine code at every execution: hundreds of milliseconds of CPU before it reads a row.
 * (The embedded database has no JIT.)
 */
const POSTGRES_SESSION = { jit: "off" } as const;

export async function openDatabase(opts: OpenOptions): Promise<Database> {
  if (opts.url) {
    const sql = postgres(opts.url, {
      ...driverOptions,
      max: opts.max ?? REQUEST_POOL_SIZE,
      connection: POSTGRES_SESSION,
    });
    await sql`select 1`;
    return { sql, kind: "postgres", close: () => sql.end({ timeout: 5 }) };
  }
  if (!opts.pglite) throw new Error("an embedded database needs the runtime's PGlite files (pglite)");
  const embedded = await openEmbedded(opts.dataDir, opts.log, opts.pglite);
  // PGlite is a single session: exactly one connection, or transactions leak into each other.
  // `socket` is postgres.js's documented custom-socket option (absent from its type declarations):
  // it accepts any object with the socket methods the driver uses, see db/engine/pgliteWire.ts.
  const options = {
    ...driverOptions,
    socket: () => embedded.connect(),
    username: "postgres",
    database: "postgres",
    max: 1,
    // The driver retires connections after 30–60 minutes by default; an in-process one gains nothing
    // from it, and each new one prepares every statement again in the one session.
    max_lifetime: null,
    // No network to wait for: a new connection's startup only waits for the statement PGlite is
    // running on its thread (a long migration or vacuum), which must not fail it after 30 s.
    connect_timeout: 0,
  };
  const sql = postgres(options as unknown as postgres.Options<Record<string, never>>);
  try {
    await sql`select 1`;
  } catch (err) {
    await sql.end({ timeout: 1 });
    await embedded.close();
    throw err;
  }
  return {
    sql,
    kind: "embedded",
    close: async () => {
      await sql.end({ timeout: 5 });
      await embedded.close();
    },
  };
}
