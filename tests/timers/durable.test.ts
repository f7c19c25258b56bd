import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import type { ReservedSql } from "postgres";
import { claimDue, insertTimer, takeOwned, tryLockRunner, unlockRunner } from "../../src/db/timers.ts";
import type { TimerRunner } from "../../src/timers/runner.ts";
import { databaseScheduler } from "../../src/timers/scheduler.ts";
import { createTestDatabase, TEST_DATABASE, type TestDatabase } from "../helpers/db.ts";
import { waitUntil } from "../helpers/wait.ts";
import { createFiresTable, fireCounts, registerFire, testRunner } from "./support.ts";

let db: TestDatabase;
const running: TimerRunner[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  await createFiresTable(db.sql);
});
afterEach(async () => {
  for (const r of running.splice(0)) await r.stop();
  await db.sql`delete from test_fires`;
  await db.sql`delete from timers`;
});
afterAll(() => db.close());

function start(r: TimerRunner) {
  running.push(r);
  return r.start();
}

describe("durable timers", () => {
  test("a timer fires once, from the wheel, close to its due time", async () => {
    const r = registerFire(testRunner(db));
    await start(r);
    const { dueAt } = await r.schedule(db.sql, { kind: "test.fire", delayMs: 80, payload: { name: "a" } });
    await waitUntil("timer a to fire", async () => (await fireCounts(db.sql)).get("a") === 1);
    const [row] = await db.sql<{ fired_at: Date }[]>`select fired_at from test_fires`;
    expect(row!.fired_at.getTime()).toBeGreaterThanOrEqual(dueAt.getTime());
    expect((await db.sql`select id from timers`).length).toBe(0);
  });

  test("a timer persisted before a crash fires after restart, exactly once", async () => {
    const a = registerFire(testRunner(db, { horizonMs: 10_000 }));
    await start(a);
    // Leased to A and in A's wheel, due in 5 s (however slow the 20 inserts); A dies before then.
    for (let i = 0; i < 20; i++)
      await a.schedule(db.sql, { kind: "test.fire", delayMs: 5_000, payload: { name: `t${i}` } });
    await a.abandon();
    running.splice(running.indexOf(a), 1);
    expect((await fireCounts(db.sql)).size).toBe(0);
    const leased = await db.sql`select id from timers where locked_by = ${a.runnerId}`;
    expect(leased.length).toBe(20);
    // Wait until they are all overdue: nobody fires them meanwhile.
    await waitUntil(
      "every timer to come due",
      async () => (await db.sql`select 1 from timers where due_at > now()`).length === 0,
    );
    await Bun.sleep(50);
    expect((await fireCounts(db.sql)).size).toBe(0);

    const b = registerFire(testRunner(db));
    const [{ restarted }] = (await db.sql`select clock_timestamp() as restarted`) as unknown as [
      { restarted: Date },
    ];
    await start(b);
    await waitUntil("the 20 timers to fire", async () => (await fireCounts(db.sql)).size === 20);
    // Overdue timers of a dead runner are taken over at once, not when its lease ends (30 s).
    const [{ last }] = (await db.sql`select max(fired_at) as last from test_fires`) as unknown as [
      { last: Date },
    ];
    expect(last.getTime() - restarted.getTime()).toBeLessThan(10_000);
    await Bun.sleep(100);
    const counts = await fireCounts(db.sql);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    const runners = await db.sql<{ runner: number }[]>`select distinct runner from test_fires`;
    expect(runners.map((r) => r.runner)).toEqual([b.runnerId]);
  });

  test("a timer scheduled in a transaction that commits late still fires; one rolled back never does", async () => {
    const r = registerFire(testRunner(db));
    await start(r);
    await db.sql.begin(async (t) => {
      const tx = t;
      await r.schedule(tx, { kind: "test.fire", delayMs: 10, payload: { name: "late-commit" } });
      await Bun.sleep(150);
    });
    await db.sql
      .begin(async (t) => {
        const tx = t;
        await r.schedule(tx, { kind: "test.fire", delayMs: 10, payload: { name: "rolled-back" } });
        throw new Error("abort");
      })
      .catch(() => {});
    await waitUntil(
      "the late-committed timer to fire",
      async () => (await fireCounts(db.sql)).get("late-commit") === 1,
    );
    await Bun.sleep(200);
    expect((await fireCounts(db.sql)).get("rolled-back")).toBeUndefined();
  });

  test("far-future timers stay free in the table and are claimed when they come near", async () => {
    const r = registerFire(testRunner(db, { horizonMs: 200 }));
    await start(r);
    await r.schedule(db.sql, { kind: "test.fire", delayMs: 600, payload: { name: "far" } });
    const [row] = await db.sql<{ locked_by: number | null }[]>`select locked_by from timers`;
    expect(row!.locked_by).toBeNull();
    await waitUntil("the far timer to fire", async () => (await fireCounts(db.sql)).get("far") === 1);
  });

  test("a live runner's lease is respected until it ends, then taken over within its length", async () => {
    // A "stuck" runner: alive (its liveness lock is held) but never firing what it claimed. Its lease
    // is long enough that the other runner has started, and looked at the row, well before it ends.
    const LEASE_MS = 3_000;
    const stuck = 4242;
    const conn: ReservedSql | null = db.kind === "postgres" ? await db.sql.reserve() : null;
    const lockSql = conn ?? db.sql;
    expect(await tryLockRunner(lockSql, stuck)).toBe(true);
    try {
      await insertTimer(db.sql, { kind: "test.fire", delayMs: 0, payload: { name: "leased" } });
      const claimed = await claimDue(db.sql, { runner: stuck, horizonMs: 0, leaseMs: LEASE_MS, limit: 10 });
      expect(claimed.timers.length).toBe(1);
      const [lease] = await db.sql<{ ends: Date }[]>`
        select locked_until as ends from timers where id = ${claimed.timers[0]!.id}::bigint`;
      const b = registerFire(testRunner(db));
      // Its start waits for its first claim: it saw the row while the lease ran.
      await start(b);
      const [seen] = await db.sql<{ at: Date }[]>`select clock_timestamp() as at`;
      expect(seen!.at.getTime()).toBeLessThan(lease!.ends.getTime());
      await waitUntil(
        "the leased timer to fire once its lease ends",
        async () => (await fireCounts(db.sql)).get("leased") === 1,
        { timeoutMs: LEASE_MS + 10_000 },
      );
      // When it fired, by the database's clock, which also ended the lease: not before the lease
      // ended, and within the lease's length after.
      const [fired] = await db.sql<
        { at: Date }[]
      >`select fired_at as at from test_fires where name = 'leased'`;
      expect(fired!.at.getTime()).toBeGreaterThanOrEqual(lease!.ends.getTime());
      expect(fired!.at.getTime() - lease!.ends.getTime()).toBeLessThanOrEqual(LEASE_MS);
      // The stuck runner's late attempt is fenced out by the epoch.
      const owned = await db.sql.begin((tx) => takeOwned(tx, stuck, claimed.timers));
      expect(owned.size).toBe(0);
    } finally {
      await unlockRunner(lockSql, stuck);
      conn?.release();
    }
  });

  test("fencing: after a takeover only the newest claim may fire a row", async () => {
    await insertTimer(db.sql, { kind: "test.fire", delayMs: 0, payload: { name: "x" } });
    // Runner 1 is not alive (no liveness lock), so runner 2 takes over at once.
    const first = await claimDue(db.sql, { runner: 1, horizonMs: 0, leaseMs: 60_000, limit: 1 });
    const second = await claimDue(db.sql, { runner: 2, horizonMs: 0, leaseMs: 60_000, limit: 1 });
    expect(second.timers[0]!.epoch).toBe(first.timers[0]!.epoch + 1);
    expect((await db.sql.begin((tx) => takeOwned(tx, 1, first.timers))).size).toBe(0);
    // The runner's own older claim is fenced out too: only the epoch it holds the row at counts.
    const stale = second.timers.map((t) => ({ ...t, epoch: t.epoch - 1 }));
    expect((await db.sql.begin((tx) => takeOwned(tx, 2, stale))).size).toBe(0);
    expect((await db.sql.begin((tx) => takeOwned(tx, 2, second.timers))).size).toBe(1);
    // Taking is completing: the row is gone once that transaction commits.
    expect((await db.sql`select count(*)::int as n from timers`)[0]!.n).toBe(0);
  });

  test("two runners on one database share the work and never fire a timer twice", async () => {
    const a = registerFire(testRunner(db, { batchSize: 25 }));
    const b = registerFire(testRunner(db, { batchSize: 25 }));
    await start(a);
    await start(b);
    const n = 1500;
    // Free rows (as created by a process without a runner) spread over 600 ms, plus some leased to each.
    await db.sql`
      insert into timers (kind, due_at, payload)
      select 'test.fire', now() + (i % 600) * interval '1 millisecond', jsonb_build_object('name', 'f' || i)
      from generate_series(1, ${n}) i`;
    for (let i = 0; i < 50; i++) {
      await a.schedule(db.sql, { kind: "test.fire", delayMs: i * 5, payload: { name: `a${i}` } });
      await b.schedule(db.sql, { kind: "test.fire", delayMs: i * 5, payload: { name: `b${i}` } });
    }
    await waitUntil(
      `all ${n + 100} timers to fire`,
      async () => (await fireCounts(db.sql)).size === n + 100,
      { timeoutMs: 20_000 },
    );
    await Bun.sleep(200);
    const counts = await fireCounts(db.sql);
    expect(counts.size).toBe(n + 100);
    expect([...counts.values()].filter((c) => c !== 1)).toEqual([]);
    const [{ total }] = (await db.sql`select count(*)::int as total from test_fires`) as unknown as [
      { total: number },
    ];
    expect(total).toBe(n + 100);
    expect(a.stats().fired).toBeGreaterThan(0);
    expect(b.stats().fired).toBeGreaterThan(0);
    expect(a.stats().fired + b.stats().fired).toBe(n + 100);
  });

  test("a timer written without a runner in the process (databaseScheduler) is fired by a runner", async () => {
    const r = registerFire(testRunner(db));
    await start(r);
    await databaseScheduler.schedule(db.sql, { kind: "test.fire", delayMs: 30, payload: { name: "plain" } });
    await waitUntil("the plain timer to fire", async () => (await fireCounts(db.sql)).get("plain") === 1);
  });

  // PostgreSQL only: the embedded database's one session makes the first look wait for the commit.
  test.skipIf(TEST_DATABASE !== "postgres")(
    "timers written by another statement than schedule, whose commit comes late, are found by the look after soon()",
    async () => {
      // No regular poll within the test: only `soon()` and its second look can find the row.
      const r = registerFire(testRunner(db, { pollIntervalMs: 60_000 }));
      await start(r);
      await Bun.sleep(100);
      await db.sql.begin(async (tx) => {
        await tx`insert into timers (kind, due_at, payload) values ('test.fire', now(), '{"name": "trigger"}')`;
        r.soon();
        // The commit comes after the first look, as on a busy database.
        await Bun.sleep(120);
      });
      await waitUntil("the timer to fire", async () => (await fireCounts(db.sql)).get("trigger") === 1, {
        timeoutMs: 10_000,
      });
    },
  );

  test("a cancelled timer never fires", async () => {
    const r = registerFire(testRunner(db));
    await start(r);
    const { id } = await r.schedule(db.sql, { kind: "test.fire", delayMs: 100, payload: { name: "c" } });
    expect(await r.cancel(db.sql, id)).toBe(true);
    expect(await r.cancel(db.sql, id)).toBe(false);
    await Bun.sleep(250);
    expect((await fireCounts(db.sql)).get("c")).toBeUndefined();
  });

  test("a timer whose cancel committed leaves the wheel when told: no firing transaction for it", async () => {
    const r = registerFire(testRunner(db));
    await start(r);
    const told = await r.schedule(db.sql, { kind: "test.fire", delayMs: 100, payload: { name: "told" } });
    expect(await r.cancel(db.sql, told.id)).toBe(true);
    r.cancelled([told.id]);
    expect(r.stats().held).toBe(0);
    const before = r.stats().transactions;
    await Bun.sleep(300);
    expect(r.stats().transactions).toBe(before);
    // Untold, the wheel fires it when due, into a transaction that finds no row.
    const untold = await r.schedule(db.sql, { kind: "test.fire", delayMs: 100, payload: { name: "untold" } });
    expect(await r.cancel(db.sql, untold.id)).toBe(true);
    await waitUntil("the untold timer's firing", async () => r.stats().transactions > before);
    expect((await fireCounts(db.sql)).size).toBe(0);
  });

  test("a batch handler gets the timers due together in one call; on failure each is retried alone", async () => {
    const calls: number[] = [];
    const r = testRunner(db, { backoff: () => 60_000 });
    r.registerBatch("test.batch", async ({ tx, timers }) => {
      calls.push(timers.length);
      if (timers.length > 1 && timers.some((t) => t.payload.name === "poison"))
        throw new Error("poisoned batch");
      if (timers.some((t) => t.payload.name === "poison")) throw new Error("poison");
      for (const t of timers)
        await tx`insert into test_fires (timer_id, name, runner) values (${t.id}::bigint, ${String(t.payload.name)}, 0)`;
    });
    await start(r);
    await db.sql`
      insert into timers (kind, due_at, payload)
      select 'test.batch', now(), jsonb_build_object('name', 'b' || i) from generate_series(1, 20) i`;
    await waitUntil("the 20 timers to fire", async () => (await fireCounts(db.sql)).size === 20);
    expect(Math.max(...calls)).toBeGreaterThan(1);
    calls.length = 0;
    await db.sql`
      insert into timers (kind, due_at, payload)
      select 'test.batch', now(), jsonb_build_object('name', case when i = 3 then 'poison' else 'p' || i end)
      from generate_series(1, 6) i`;
    await waitUntil("the 25 timers to fire", async () => (await fireCounts(db.sql)).size === 25);
    await waitUntil(
      "the poisoned timer's error to be recorded",
      async () => (await db.sql`select 1 from timers where last_error = 'poison'`).length === 1,
    );
    // The poisoned batch was rolled back whole, then each timer ran alone.
    expect(calls.filter((n) => n === 1).length).toBeGreaterThanOrEqual(6);
    expect([...(await fireCounts(db.sql)).values()].every((n) => n === 1)).toBe(true);
  });

  test("follow-ups scheduled by a handler are armed in the wheel after commit and fire on time", async () => {
    const r = testRunner(db, { pollIntervalMs: 60_000 });
    r.register("test.chain", async ({ tx, timer, schedule }) => {
      const n = Number(timer.payload.n);
      await tx`insert into test_fires (timer_id, name, runner) values (${timer.id}::bigint, ${`c${n}`}, 0)`;
      if (n < 5) await schedule({ kind: "test.chain", delayMs: 20, payload: { n: n + 1 } });
    });
    await start(r);
    await r.schedule(db.sql, { kind: "test.chain", delayMs: 0, payload: { n: 1 } });
    // Five links of 20 ms, with no poll for a minute: each was placed in the wheel directly.
    await waitUntil("the 5 timers to fire", async () => (await fireCounts(db.sql)).size === 5, {
      timeoutMs: 20_000,
    });
    const [{ spread }] = (await db.sql`
      select extract(epoch from max(fired_at) - min(fired_at))::float8 as spread from test_fires`) as unknown as [
      { spread: number },
    ];
    expect(spread).toBeLessThan(10);
  });

  test("a database-only batch runs ahead of its take; rows taken over meanwhile roll it back and the rest fire once", async () => {
    const calls: string[][] = [];
    const r = testRunner(db, { horizonMs: 2000 }).registerBatch(
      "test.batch",
      async ({ tx, timers }) => {
        calls.push(timers.map((t) => String(t.payload.name)));
        for (const t of timers)
          await tx`insert into test_fires (timer_id, name, runner) values (${t.id}::bigint, ${String(t.payload.name)}, 1)`;
      },
      { databaseOnly: true },
    );
    await start(r);
    // Ten timers due together (one transaction: one now()), held by r.
    const ids = await db.sql.begin(async (t) => {
      const tx = t;
      const out: string[] = [];
      for (let i = 0; i < 10; i++)
        out.push((await r.schedule(tx, { kind: "test.batch", delayMs: 400, payload: { name: `b${i}` } })).id);
      return out;
    });
    // Before they are due, a live runner takes three of them over.
    const other = 5151;
    const conn: ReservedSql | null = db.kind === "postgres" ? await db.sql.reserve() : null;
    const lockSql = conn ?? db.sql;
    expect(await tryLockRunner(lockSql, other)).toBe(true);
    try {
      const stolen = ids.slice(0, 3);
      await db.sql`
        update timers set locked_by = ${other}, epoch = epoch + 1, locked_until = now() + interval '1 hour'
        where id = any(${stolen}::bigint[])`;
      await waitUntil("the 7 timers left to fire", async () => (await fireCounts(db.sql)).size === 7);
      await Bun.sleep(150);
      const counts = await fireCounts(db.sql);
      expect([...counts.keys()].sort()).toEqual(["b3", "b4", "b5", "b6", "b7", "b8", "b9"]);
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      // The handler ran ahead of the take on rows that were no longer r's; those runs rolled back.
      const stolenNames = new Set(["b0", "b1", "b2"]);
      expect(calls.some((names) => names.some((n) => stolenNames.has(n)))).toBe(true);
      expect(calls.flat().filter((n) => !stolenNames.has(n)).length).toBeGreaterThanOrEqual(7);
      const left = await db.sql<{ id: string }[]>`select id::text as id from timers order by id`;
      expect(left.map((x) => x.id)).toEqual(stolen);
    } finally {
      await r.stop();
      running.splice(running.indexOf(r), 1);
      await unlockRunner(lockSql, other);
      conn?.release();
    }
  });
});
