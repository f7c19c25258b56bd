import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { insertTimer, RUNNER_LOCK_NAMESPACE } from "../../src/db/timers.ts";
import { RunnerLiveness } from "../../src/timers/liveness.ts";
import type { TimerRunner } from "../../src/timers/runner.ts";
import { createTestDatabase, TEST_DATABASE, type TestDatabase } from "../helpers/db.ts";
import { waitUntil } from "../helpers/wait.ts";
import { createFiresTable, fireCounts, registerFire, testRunner } from "./support.ts";

/**
 * The liveness lock's session closed by the database (a restart, `pg_terminate_backend`): the process
 * goes on, takes a new identity on a new session, and its timers keep firing. Before, the lock sat on
 * a connection reserved from the pool, and the driver ended the process at the next check.
 */

let db: TestDatabase;
let killer: postgres.Sql;
const running: TimerRunner[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  if (db.url) killer = postgres(db.url, { max: 1, onnotice: () => {} });
  await createFiresTable(db.sql);
});
afterEach(async () => {
  for (const r of running.splice(0)) await r.stop();
});
afterAll(async () => {
  await killer?.end({ timeout: 1 });
  await db.close();
});

/** Terminates the session holding `runner`'s liveness lock; the number of sessions terminated. */
async function terminateLockSession(runner: number): Promise<number> {
  const rows = await killer<{ ok: boolean }[]>`
    select pg_terminate_backend(pid) as ok from pg_locks
    where locktype = 'advisory' and classid = ${RUNNER_LOCK_NAMESPACE}::int4::oid
      and objid = ${runner}::int4::oid and objsubid = 2`;
  return rows.filter((r) => r.ok).length;
}

async function lockHolders(runner: number): Promise<number> {
  const [row] = await killer<{ n: number }[]>`
    select count(*)::int as n from pg_locks
    where locktype = 'advisory' and granted and classid = ${RUNNER_LOCK_NAMESPACE}::int4::oid
      and objid = ${runner}::int4::oid and objsubid = 2`;
  return row!.n;
}

describe.skipIf(TEST_DATABASE === "embedded")("the liveness lock's session lost", () => {
  test("check() reports it once, takes a new identity whose lock is held, and the process lives", async () => {
    const liveness = new RunnerLiveness(db.sql, "own");
    await liveness.acquire();
    try {
      const first = liveness.runner;
      expect(await liveness.check()).toBeNull();
      expect(await terminateLockSession(first)).toBe(1);
      // Long enough for the close to reach the driver, and for anything it scheduled to have run.
      await new Promise((r) => setTimeout(r, 100));
      const lost = await liveness.check();
      expect(lost).toBeInstanceOf(Error);
      expect(liveness.runner).not.toBe(first);
      expect(await lockHolders(first)).toBe(0);
      expect(await lockHolders(liveness.runner)).toBe(1);
      expect(await liveness.check()).toBeNull();
    } finally {
      await liveness.release();
    }
    expect(await lockHolders(liveness.runner)).toBe(0);
  });

  test("a runner whose lock session is terminated keeps firing timers under its new identity", async () => {
    const logs: string[] = [];
    const r = registerFire(testRunner(db, {}, logs));
    running.push(r);
    await r.start();
    const before = r.runnerId;
    await insertTimer(db.sql, { kind: "test.fire", delayMs: 0, payload: { name: "before" } });
    await waitUntil("the first timer to fire", async () => (await fireCounts(db.sql)).get("before") === 1);
    expect(await terminateLockSession(before)).toBe(1);
    await waitUntil("a new lease identity", () => r.runnerId !== before, { timeoutMs: 5_000 });
    expect(logs.some((l) => l.includes("liveness connection lost"))).toBe(true);
    await insertTimer(db.sql, { kind: "test.fire", delayMs: 0, payload: { name: "after" } });
    await waitUntil(
      "the timer after the loss to fire",
      async () => (await fireCounts(db.sql)).get("after") === 1,
    );
    expect(await lockHolders(r.runnerId)).toBe(1);
  });
});
