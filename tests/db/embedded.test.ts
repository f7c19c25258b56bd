import { afterAll, describe, expect, test } from "bun:test";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { openDatabase } from "../../src/db/engine/connection.ts";
import { DataDirInUseError } from "../../src/db/engine/dataDirLock.ts";
import { openEmbedded } from "../../src/db/engine/embedded.ts";
import { migrate } from "../../src/db/engine/migrate.ts";
import { PgliteThread } from "../../src/db/engine/pgliteThread.ts";
import { createLogger, silentLogger } from "../../src/log.ts";
import { bunPgliteFiles } from "../../src/runtime/bunFiles.ts";
import { waitUntil } from "../helpers/wait.ts";
import { MAIN, spawnService, stopService } from "./serviceProcess.ts";

const FIXTURE = join(import.meta.dir, "fixtures", "commitThenWait.ts");
const folders: string[] = [];
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "vs-embedded-"));
  folders.push(dir);
  return dir;
}

const open = (dataDir: string) => openDatabase({ dataDir, log: silentLogger, pglite: bunPgliteFiles });

async function organizationIds(dataDir: string): Promise<string[]> {
  const db = await open(dataDir);
  try {
    const rows = await db.sql<{ id: string }[]>`select id from organizations order by id`;
    return rows.map((r) => r.id);
  } finally {
    await db.close();
  }
}

/** A pid that is certainly not running: a child that has exited. */
async function deadPid(): Promise<number> {
  const child = Bun.spawn(["true"]);
  await child.exited;
  return child.pid;
}

function startTimeOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]!;
}

describe("embedded database: persistence", () => {
  test("data committed before a clean close is there after a restart", async () => {
    const dataDir = join(tempDir(), "data");
    const db = await open(dataDir);
    await migrate(db.sql);
    await db.sql`insert into organizations (id, name, created_at) values ('org_restart', 'Acme', now())`;
    await db.close();
    expect(existsSync(join(dataDir, "voice-service.lock"))).toBe(false);

    expect(await organizationIds(dataDir)).toEqual(["org_restart"]);
  });

  test("kill -9 of a process holding the database keeps every committed transaction", async () => {
    const dataDir = join(tempDir(), "data");
    const child = spawnService([], { command: [process.execPath, FIXTURE], env: { DATA_DIR: dataDir } });
    await child.waitFor(/committed 5/);
    child.proc.kill("SIGKILL");
    await child.exited;
    // The lock of the killed process is still there: the next start takes it over.
    expect(JSON.parse(readFileSync(join(dataDir, "voice-service.lock"), "utf8")).pid).toBe(child.pid);

    expect(await organizationIds(dataDir)).toEqual([0, 1, 2, 3, 4].map((i) => `org_crash_${i}`));
  });

  test("kill -9 of a serving process, then serve again on the same DATA_DIR", async () => {
    const dir = tempDir();
    const env = { DATA_DIR: join(dir, "data"), PORT: "0" };
    const first = spawnService(["serve"], { env });
    await first.listening();
    first.proc.kill("SIGKILL");
    await first.exited;

    const second = spawnService(["serve"], { env });
    const url = await second.listening();
    expect((await fetch(`${url}/api/openapi.json`)).status).toBe(200);
    const { code } = await stopService(second);
    expect(code).toBe(0);

    // The migrations the killed process committed are recorded once: the second start applied nothing.
    expect(second.output()).not.toContain("migration applied");
    const db = await open(env.DATA_DIR);
    const rows = await db.sql`select name from schema_migrations`;
    await db.close();
    expect(rows.map((r) => r.name)).toContain("0001_init");
  });
});

describe("embedded database: one process per DATA_DIR", () => {
  test("a second process gets a clear error and a non-zero exit; the first keeps serving", async () => {
    const dir = tempDir();
    const env = { DATA_DIR: join(dir, "data"), PORT: "0" };
    const first = spawnService(["serve"], { env });
    const url = await first.listening();

    const second = spawnService(["migrate"], { env });
    const code = await second.exited;
    expect(code).not.toBe(0);
    expect(second.output()).toContain(`DATA_DIR ${env.DATA_DIR} is in use by process ${first.pid}`);

    expect((await fetch(`${url}/api/openapi.json`)).status).toBe(200);
    expect(JSON.parse(readFileSync(join(env.DATA_DIR, "voice-service.lock"), "utf8")).pid).toBe(first.pid);
    expect((await stopService(first)).code).toBe(0);
    expect(existsSync(join(env.DATA_DIR, "voice-service.lock"))).toBe(false);
  });

  test("a second open in the same process is refused too, and the first connection keeps working", async () => {
    const dataDir = join(tempDir(), "data");
    const db = await open(dataDir);
    try {
      const error = await open(dataDir).catch((err) => err);
      expect(error).toBeInstanceOf(DataDirInUseError);
      expect(error.message).toBe(`DATA_DIR ${dataDir} is in use by process ${process.pid}`);
      expect([...(await db.sql`select 1 as one`)]).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  });

  test("a lock held by a live process is respected", async () => {
    const dataDir = join(tempDir(), "data");
    mkdirSync(dataDir);
    const owner = process.ppid;
    writeFileSync(
      join(dataDir, "voice-service.lock"),
      JSON.stringify({ pid: owner, started: startTimeOf(owner) }),
    );
    await expect(open(dataDir)).rejects.toThrow(`DATA_DIR ${dataDir} is in use by process ${owner}`);
    // Nothing was created next to the other process's database.
    expect(readdirSync(dataDir)).toEqual(["voice-service.lock"]);
  });

  test("a stale lock (dead pid, reused pid, or garbage) is taken over", async () => {
    const reused = JSON.stringify({ pid: process.ppid, started: "1" });
    for (const content of [JSON.stringify({ pid: await deadPid(), started: null }), reused, "", "{garbage"]) {
      const dataDir = join(tempDir(), "data");
      mkdirSync(dataDir);
      writeFileSync(join(dataDir, "voice-service.lock"), content);
      const db = await open(dataDir);
      const lock = JSON.parse(readFileSync(join(dataDir, "voice-service.lock"), "utf8"));
      expect(lock.pid).toBe(process.pid);
      await db.close();
    }
  });
});

/** Whether this machine can start a process in a pid namespace of its own (root, util-linux). */
const unshareWorks = (() => {
  try {
    const r = Bun.spawnSync(["unshare", "--pid", "--fork", "--mount-proc", "true"]);
    return r.exitCode === 0;
  } catch {
    return false;
  }
})();

/** The command prefix that runs a process in a new pid namespace, where it is pid 1. */
const NEW_PID_NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc"];

/** The pid, seen from here, of the process `unshare` started (pid 1 of its namespace). */
function childOf(pid: number): number {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/);
  return Number(children[0]);
}

describe.skipIf(!unshareWorks)("embedded database: one process per DATA_DIR across pid namespaces", () => {
  test("two processes that cannot see each other's pids (both pid 1): the second is refused", async () => {
    const dir = tempDir();
    const env = { DATA_DIR: join(dir, "data"), PORT: "0" };
    const command = [...NEW_PID_NAMESPACE, process.execPath, MAIN];
    const first = spawnService(["serve"], { env, command });
    const url = await first.listening();
    const firstLock = JSON.parse(readFileSync(join(env.DATA_DIR, "voice-service.lock"), "utf8"));
    expect(firstLock.pid).toBe(1);

    // The second is pid 1 too, in a namespace of its own: the first's pid means nothing to it.
    const second = spawnService(["migrate"], { env, command });
    expect(await second.exited).not.toBe(0);
    expect(second.output()).toContain(`DATA_DIR ${env.DATA_DIR} is in use by process 1`);
    // Nor does a process in this namespace take it, where pid 1 is someone else.
    const third = spawnService(["migrate"], { env });
    expect(await third.exited).not.toBe(0);
    expect(third.output()).toContain(`DATA_DIR ${env.DATA_DIR} is in use by process 1`);

    expect((await fetch(`${url}/api/openapi.json`)).status).toBe(200);
    expect(JSON.parse(readFileSync(join(env.DATA_DIR, "voice-service.lock"), "utf8")).owner).toBe(
      firstLock.owner,
    );

    // The first stops beating while its namespace lives on (frozen, as a process whose thread a
    // long statement holds): however old its last beat looks, a start in another namespace does not
    // take over at first sight. It says it waits for the heartbeat; once the first beats again, it is
    // refused. (Taking over after the stale period, a minute, is shown by the lock's own tests with a
    // short one.)
    const holder = childOf(first.pid);
    process.kill(holder, "SIGSTOP");
    try {
      const old = new Date(Date.now() - 3600_000);
      utimesSync(join(env.DATA_DIR, "voice-service.lock"), old, old);
      const next = spawnService(["migrate"], { env, command });
      await next.waitFor(/waiting for its heartbeat/);
      await Bun.sleep(1_000);
      expect(next.proc.exitCode).toBeNull();
      process.kill(holder, "SIGCONT");
      expect(await next.exited).not.toBe(0);
      expect(next.output()).toContain(`DATA_DIR ${env.DATA_DIR} is in use by process 1`);
    } finally {
      process.kill(holder, "SIGCONT");
    }
    expect(JSON.parse(readFileSync(join(env.DATA_DIR, "voice-service.lock"), "utf8")).owner).toBe(
      firstLock.owner,
    );
    expect((await fetch(`${url}/api/openapi.json`)).status).toBe(200);
    process.kill(holder, "SIGKILL");
    await first.exited;
  });
});

describe("embedded database: first start", () => {
  async function expectUsable(dataDir: string) {
    const db = await open(dataDir);
    await migrate(db.sql);
    expect([...(await db.sql`select count(*)::int as n from organizations`)]).toEqual([{ n: 0 }]);
    await db.close();
    expect(readdirSync(dataDir).sort()).toEqual(["pgdata"]);
  }

  test("a first start killed while it writes the data directory is repaired by the next start", async () => {
    const dataDir = join(tempDir(), "data");
    const child = spawnService(["migrate"], { env: { DATA_DIR: dataDir } });
    let staging: string | undefined;
    await waitUntil(
      "the initialisation folder, or the end of the process",
      () => {
        staging = existsSync(dataDir)
          ? readdirSync(dataDir).find((n) => n.startsWith("pgdata.init-"))
          : undefined;
        return staging !== undefined || child.proc.exitCode !== null;
      },
      { stepMs: 1 },
    );
    child.proc.kill("SIGKILL");
    await child.exited;
    expect(staging).toBe(`pgdata.init-${child.pid}`);
    await expectUsable(dataDir);
  });

  test("a first start killed at other moments is repaired by the next start", async () => {
    for (const delayMs of [0, 150, 400]) {
      const dataDir = join(tempDir(), "data");
      const child = spawnService(["migrate"], { env: { DATA_DIR: dataDir } });
      await Bun.sleep(delayMs);
      child.proc.kill("SIGKILL");
      await child.exited;
      await expectUsable(dataDir);
    }
  });

  test("a half-written initialisation folder is deleted and the database created afresh", async () => {
    const dataDir = join(tempDir(), "data");
    const staging = join(dataDir, "pgdata.init-4242");
    mkdirSync(join(staging, "base"), { recursive: true });
    writeFileSync(join(staging, "PG_VERSION"), "18\n");
    writeFileSync(
      join(dataDir, "voice-service.lock"),
      JSON.stringify({ pid: await deadPid(), started: null }),
    );

    const db = await open(dataDir);
    await migrate(db.sql);
    await db.close();
    expect(readdirSync(dataDir).sort()).toEqual(["pgdata"]);
  });

  test("a leftover initialisation folder never costs an existing database", async () => {
    const dataDir = join(tempDir(), "data");
    const db = await open(dataDir);
    await migrate(db.sql);
    await db.sql`insert into organizations (id, name, created_at) values ('org_kept', 'Kept', now())`;
    await db.close();
    mkdirSync(join(dataDir, "pgdata.init-4242"));

    expect(await organizationIds(dataDir)).toEqual(["org_kept"]);
    expect(existsSync(join(dataDir, "pgdata.init-4242"))).toBe(false);
  });

  test("a pgdata folder that is not a database is left alone with a clear error", async () => {
    const dataDir = join(tempDir(), "data");
    mkdirSync(join(dataDir, "pgdata"), { recursive: true });
    writeFileSync(join(dataDir, "pgdata", "notes.txt"), "mine");
    await expect(open(dataDir)).rejects.toThrow(
      `${join(dataDir, "pgdata")} is not a PostgreSQL data directory`,
    );
    expect(readFileSync(join(dataDir, "pgdata", "notes.txt"), "utf8")).toBe("mine");
    expect(existsSync(join(dataDir, "voice-service.lock"))).toBe(false);
  });

  test("the template databases, which its one session cannot vacuum, go at the first open: the cluster's oldest frozen-xid age is then the service database's own", async () => {
    const dataDir = join(tempDir(), "data");
    const logs: string[] = [];
    const log = createLogger("info", (line) => logs.push(line));
    const databases = async () => {
      const db = await openDatabase({ dataDir, log, pglite: bunPgliteFiles });
      try {
        await db.sql`vacuum (freeze)`;
        return [
          ...(await db.sql`select datname as name, age(datfrozenxid) as age from pg_database order by datname`),
        ];
      } finally {
        await db.close();
      }
    };
    expect(await databases()).toEqual([{ name: "postgres", age: expect.any(Number) }]);
    expect((await databases())[0]!.age).toBeLessThan(10);
    const dropped = logs.filter((l) => l.includes("dropped a template database"));
    expect(dropped.map((l) => JSON.parse(l).database).sort()).toEqual(["template0", "template1"]);
  });

  test("a data directory at the top of DATA_DIR (earlier layout) is refused, not replaced", async () => {
    const dataDir = join(tempDir(), "data");
    mkdirSync(dataDir);
    writeFileSync(join(dataDir, "PG_VERSION"), "18\n");
    await expect(open(dataDir)).rejects.toThrow("holds a PostgreSQL data directory at its top level");
    expect(readdirSync(dataDir)).toEqual(["PG_VERSION"]);
  });
});

describe("embedded database: transport", () => {
  test("postgres.js reaches PGlite inside the process: no socket or port, one session", async () => {
    const dataDir = join(tempDir(), "data");
    // The run/ folder of the earlier Unix-socket transport is removed at start.
    mkdirSync(join(dataDir, "run"), { recursive: true });
    writeFileSync(join(dataDir, "run", ".s.PGSQL.5432"), "");
    const db = await open(dataDir);
    try {
      expect(readdirSync(dataDir).sort()).toEqual(["pgdata", "voice-service.lock"]);
      expect(statSync(join(dataDir, "pgdata")).mode & 0o777).toBe(0o700);
      // One session: a transaction and the queries after it run on the same connection.
      await db.sql.begin(async (tx) => {
        await tx`create temporary table probe (n int) on commit drop`;
        await tx`insert into probe values (1)`;
      });
      expect([...(await db.sql`select current_setting('shared_buffers') as sb`)]).toEqual([{ sb: "16MB" }]);
    } finally {
      await db.close();
    }
  });

  test("PGlite runs on a thread of its own: the event loop keeps turning while a long statement runs", async () => {
    const db = await open(join(tempDir(), "data"));
    try {
      let turns = 0;
      const ticker = setInterval(() => turns++, 5);
      const started = performance.now();
      const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from generate_series(1, 4000000)`;
      const ms = performance.now() - started;
      clearInterval(ticker);
      expect(row!.n).toBe(4_000_000);
      // On the server's thread the statement held it from start to end: no turn at all.
      expect(ms).toBeGreaterThan(100);
      expect(turns).toBeGreaterThan(ms / 5 / 4);
    } finally {
      await db.close();
    }
  });

  test("a database thread that cannot start, or that stops, fails what waits on it; once open, it is reported", async () => {
    const dir = tempDir();
    const workerOf = (name: string, source: string) => {
      writeFileSync(join(dir, name), source);
      return new Worker(join(dir, name), { type: "module" });
    };
    const request = {
      dataDir: join(dir, "unused"),
      engine: await bunPgliteFiles.engine(),
      fsBundle: new Blob([]),
      startParams: [],
    };
    const never = () => {
      throw new Error("not open yet: nothing is lost");
    };
    // A module that throws as it loads: open is refused, it does not wait forever.
    const broken = workerOf("broken.ts", `throw new Error("no engine here");`);
    expect(
      await PgliteThread.open(broken, request, never).then(
        () => "opened",
        (e: Error) => e.message,
      ),
    ).toContain("thread");
    // A thread that opens, then stops: the loss is reported once, and every call after it fails.
    const dying = workerOf(
      "dying.ts",
      `self.onmessage = (e) => {
         postMessage({ id: e.data.id, ok: true });
         if (e.data.op === "protocol") process.exit(0);
       };`,
    );
    const lost: string[] = [];
    const thread = await PgliteThread.open(dying, request, (err) => lost.push(err.message));
    const answer = await thread.protocol(new Uint8Array([1])).then(
      () => "answered",
      (e: Error) => e.message,
    );
    await waitUntil("the loss reported", () => lost.length > 0);
    expect(answer).toBe("answered");
    expect(lost).toHaveLength(1);
    expect(
      await thread.reset().then(
        () => "reset",
        (e: Error) => e.message,
      ),
    ).toContain("stopped");
  });

  test("statements sent together are answered in order; an error fails only its statement", async () => {
    const db = await open(join(tempDir(), "data"));
    try {
      // 200 statements queued in one turn of the event loop reach PGlite as a few batches.
      const results = await Promise.allSettled(
        Array.from({ length: 200 }, (_, i) =>
          i === 57 ? db.sql`select 1 / ${0}::int as n` : db.sql`select ${i}::int as n`,
        ),
      );
      expect(results[57]!.status).toBe("rejected");
      expect(String((results[57] as PromiseRejectedResult).reason)).toContain("division by zero");
      const values = results.map((r) => (r.status === "fulfilled" ? r.value[0]!.n : "error"));
      expect(values).toEqual(Array.from({ length: 200 }, (_, i) => (i === 57 ? "error" : i)));
    } finally {
      await db.close();
    }
  });

  test("large statements and answers cross the wire whole (several megabytes each way)", async () => {
    const db = await open(join(tempDir(), "data"));
    try {
      const big = "ab".repeat(1_500_000);
      const [echo] = await db.sql<{ s: string; n: number }[]>`select ${big}::text as s, length(${big}) as n`;
      expect(echo!.n).toBe(3_000_000);
      expect(echo!.s === big).toBe(true);
      const rows = await db.sql<{ i: number }[]>`select generate_series(1, 100000) as i`;
      expect(rows.length).toBe(100_000);
      expect(rows.at(-1)!.i).toBe(100_000);
    } finally {
      await db.close();
    }
  });

  test("one connection at a time: a second is refused, not interleaved; the next one after a close starts clean", async () => {
    const embedded = await openEmbedded(join(tempDir(), "data"), silentLogger, bunPgliteFiles);
    const connect = () =>
      postgres({ socket: () => embedded.connect(), max: 1, onnotice: () => {} } as postgres.Options<
        Record<string, never>
      >);
    try {
      const first = connect();
      await first`create table t (n int)`;
      await first`insert into t values (${1})`;
      const prepared = (await first<{ name: string }[]>`select name from pg_prepared_statements`).map(
        (r) => r.name,
      );
      expect(prepared.length).toBeGreaterThanOrEqual(3);
      await first`begin`;
      const second = connect();
      const refused = await second`select 1 as one`.catch((e: Error) => e);
      expect(String(refused)).toContain("one connection at a time");
      await second.end();
      // The first is untouched, its transaction still open.
      await first`insert into t values (${2})`;
      await first`commit`;
      await first.end();
      // After the close: none of the first connection's prepared statements is left in the session.
      const third = connect();
      const left = (await third<{ name: string }[]>`select name from pg_prepared_statements`).map(
        (r) => r.name,
      );
      expect(left.filter((name) => prepared.includes(name))).toEqual([]);
      expect([...(await third`select count(*)::int as n from t`)]).toEqual([{ n: 2 }]);
      await third.end();
    } finally {
      await embedded.close();
    }
  });

  test("a cancel request or a malformed message closes that wire with an error and leaves the session alone", async () => {
    const embedded = await openEmbedded(join(tempDir(), "data"), silentLogger, bunPgliteFiles);
    const sql = postgres({ socket: () => embedded.connect(), max: 1, onnotice: () => {} } as postgres.Options<
      Record<string, never>
    >);
    const closing = (wire: ReturnType<typeof embedded.connect>) =>
      new Promise<{ hadError: boolean; error?: string }>((resolve) => {
        let error: string | undefined;
        wire.on("error", (e: Error) => {
          error = e.message;
        });
        wire.on("close", (hadError: boolean) => resolve({ hadError, error }));
      });
    try {
      await sql`select 1`;
      const cancel = embedded.connect();
      const cancelled = closing(cancel);
      const request = Buffer.alloc(16);
      request.writeInt32BE(16, 0);
      request.writeInt32BE(80877102, 4);
      cancel.write(request);
      expect(await cancelled).toEqual({ hadError: true, error: expect.stringContaining("80877102") });

      await sql.end();
      const raw = embedded.connect();
      const broken = closing(raw);
      const startup = Buffer.from("\0\0\0\0\0\x03\0\0user\0postgres\0database\0postgres\0\0", "latin1");
      startup.writeInt32BE(startup.length, 0);
      raw.on("data", () => {});
      raw.write(startup);
      raw.write(Buffer.from([0x51, 0xff, 0xff, 0xff, 0xff]));
      expect(await broken).toEqual({ hadError: true, error: expect.stringContaining("Malformed") });

      const again = postgres({
        socket: () => embedded.connect(),
        max: 1,
        onnotice: () => {},
      } as postgres.Options<Record<string, never>>);
      expect([...(await again`select 2 as two`)]).toEqual([{ two: 2 }]);
      await again.end();
    } finally {
      await embedded.close();
    }
  });

  test("a connection that ends inside a transaction leaves no transaction behind", async () => {
    const embedded = await openEmbedded(join(tempDir(), "data"), silentLogger, bunPgliteFiles);
    const connect = (sessionName: string) =>
      postgres({
        socket: () => embedded.connect(),
        max: 1,
        onnotice: () => {},
        connection: {
          application_name: sessionName,
        },
      } as postgres.Options<Record<string, never>>);
    try {
      const first = connect("first");
      await first`create table kept (n int)`;
      await first`begin`;
      await first`insert into kept values (1)`;
      await first.end();
      // The same PGlite session, a new connection: the insert was rolled back, not left pending.
      const second = connect("second");
      expect([...(await second`select count(*)::int as n from kept`)]).toEqual([{ n: 0 }]);
      await second`insert into kept values (2)`;
      expect([...(await second`select count(*)::int as n from kept`)]).toEqual([{ n: 1 }]);
      await second.end();
    } finally {
      await embedded.close();
    }
  });
});
