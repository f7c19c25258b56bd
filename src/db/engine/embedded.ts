import { chmodSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import process from "node:process";
import type { Logger } from "../../log.ts";
import type { PgliteFiles } from "../../runtime/runtime.ts";
import { lockDataDir } from "./dataDirLock.ts";
import { loadTemplate, unpackTemplate } from "./pgdataTemplate.ts";
import { PgliteThread } from "./pgliteThread.ts";
import { type PgliteSession, PgliteWire } from "./pgliteWire.ts";

/**
 * The embedded PostgreSQL (PGlite), stored in DATA_DIR:
 *
 *   DATA_DIR/voice-service.lock   the one process using the folder, and its heartbeat (see dataDirLock.ts)
 *   DATA_DIR/pgdata/              the PostgreSQL data directory; it only ever exists complete
 *   DATA_DIR/pgdata.init-<pid>/   a first start in progress, renamed to pgdata/ when complete
 *
 * Transport: none outside the process. postgres.js talks to PGlite through an in-process wire
 * (pgliteWire.ts): PGlite has no authentication, and with no port or socket nothing else on the
 * machine can reach the database.
 *
 * Durability: PGlite runs PostgreSQL with fsync off and writes through the filesystem without
 * flushing. A committed transaction is in the operating system's page cache when the query
 * returns, so it survives the process being killed (kill -9, crash) and is replayed from the WAL
 * at the next start; it does not survive a power cut or kernel crash before the kernel writes it.
 */
export interface Embedded {
  /** A new connection for postgres.js's `socket` option. PGlite is one session: use one at a time. */
  connect(): PgliteWire;
  close(): Promise<void>;
}

/**
 * PostgreSQL's default of 128MB lives inside PGlite's WebAssembly memory, which is zeroed at every
 * start: ~100 ms of start-up and ~130 MB of resident memory. Pages missing from a smaller pool are
 * read back from the operating system's page cache, a copy rather than a disk read.
 */
const SHARED_BUFFERS = "16MB";

/** `files`: the engine, as the runtime's adapter loads it (runtime/bun.ts, runtime/deno.ts). */
export async function openEmbedded(dataDir: string, log: Logger, files: PgliteFiles): Promise<Embedded> {
  // Compiling the engine (~9 MB of WebAssembly, ~130 ms) is requested first and awaited only when
  // PGlite needs it; a failure before then must not surface as an unhandled rejection.
  const engine = files.engine();
  engine.catch(() => {});

  const root = resolve(dataDir);
  mkdirSync(root, { recursive: true, mode: 0o700 });
  const lock = await lockDataDir(root, dataDir, {
    onWait: ({ pid, heartbeatAgeMs }) =>
      log.warn("DATA_DIR is locked by a process in another container or host; waiting for its heartbeat", {
        dataDir,
        pid,
        heartbeatAgeSeconds: Math.round(heartbeatAgeMs / 1000),
      }),
    onLost: () => {
      // Another process took the folder over (this one did not beat for too long): writing on would
      // corrupt the database both now use. Stop at once; nothing is lost that was committed.
      log.error("DATA_DIR lock taken over by another process; exiting", { dataDir });
      process.exit(1);
    },
  });
  const cleanups: (() => Promise<void> | void)[] = [() => lock.release()];
  const closeAll = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  };
  try {
    const pgdata = await ensureDataDirectory(root, dataDir, files, log);
    // PGlite runs on a thread of its own (pgliteThread.ts), started once the engine is compiled on
    // this one and its file bundle read.
    const [engineModule, fsBundle] = await Promise.all([engine, files.fsBundle()]);
    lock.refresh();
    const db = await PgliteThread.open(
      files.thread(),
      {
        dataDir: pgdata,
        engine: engineModule,
        fsBundle,
        startParams: ["-c", `shared_buffers=${SHARED_BUFFERS}`],
      },
      (err) => {
        // Every statement from now on would fail, while the lock keeps any other process out: stop,
        // so that a supervisor starts the service again (nothing committed is lost).
        log.error("the embedded database's thread stopped; exiting", { dataDir, error: err.message });
        process.exit(1);
      },
    );
    lock.refresh();
    cleanups.push(() => db.close());
    await dropTemplateDatabases(db, log);
    // A run/ folder holding the Unix socket of earlier versions: nothing listens there any more.
    rmSync(join(root, "run"), { recursive: true, force: true });
    log.debug("embedded database ready", { dataDir, engine: files.enginePath });
    const session: PgliteSession = { db, owner: null };
    return { connect: () => new PgliteWire(session, lock.refresh), close: closeAll };
  } catch (err) {
    await closeAll().catch(() => {});
    throw err;
  }
}

/**
 * initdb leaves two template databases beside ours (template0, template1), which the embedded
 * database's one session, connected to its own database, can never vacuum. Their frozen-xid age
 * grows with every transaction all the same, and the server refuses writes once the oldest database
 * of the cluster nears wraparound (about 2.1 billion transactions): freezing our own database
 * (services/vacuum.ts) would not keep writes going. Nothing here creates databases, so the templates
 * go, once, on the first open that finds them (~40 ms).
 */
async function dropTemplateDatabases(db: PgliteThread, log: Logger): Promise<void> {
  const templates = await db.query<{ name: string }>(
    "select datname as name from pg_database where datname in ('template0', 'template1')",
  );
  for (const { name } of templates) {
    await db.query(`alter database ${name} is_template false`);
    await db.query(`drop database ${name}`);
    log.info("dropped a template database the embedded database cannot keep vacuumed", { database: name });
  }
}

/**
 * Returns DATA_DIR/pgdata, creating it from the template when missing. It is built in a sibling
 * folder and renamed into place, so an interrupted first start leaves only a pgdata.init-* folder,
 * which the next start deletes. A folder holding a database is never deleted.
 */
async function ensureDataDirectory(root: string, displayName: string, files: PgliteFiles, log: Logger) {
  const pgdata = join(root, "pgdata");
  if (existsSync(join(root, "PG_VERSION"))) {
    throw new Error(
      `DATA_DIR ${displayName} holds a PostgreSQL data directory at its top level; ` +
        `move its contents into ${join(displayName, "pgdata")}`,
    );
  }
  for (const name of readdirSync(root)) {
    if (!name.startsWith("pgdata.init-")) continue;
    rmSync(join(root, name), { recursive: true, force: true });
    log.warn("removed an interrupted initialisation of the embedded database", { folder: name });
  }
  if (existsSync(join(pgdata, "PG_VERSION"))) {
    chmodSync(pgdata, 0o700);
    return pgdata;
  }
  if (existsSync(pgdata)) {
    if (readdirSync(pgdata).length > 0) {
      throw new Error(
        `${join(displayName, "pgdata")} is not a PostgreSQL data directory (no PG_VERSION); move it away`,
      );
    }
    rmSync(pgdata, { recursive: true });
  }
  const template = await loadTemplate(files, log);
  const staging = join(root, `pgdata.init-${process.pid}`);
  unpackTemplate(template, staging);
  renameSync(staging, pgdata);
  log.info("created the embedded database", { dataDir: displayName });
  return pgdata;
}
