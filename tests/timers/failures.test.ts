import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import type { TimerRunner } from "../../src/timers/runner.ts";
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

describe("work after the commit", () => {
  test("afterCommit runs once the firing committed, never for an attempt that rolled back", async () => {
    const ran: string[] = [];
    let failNext = true;
    const r = testRunner(db);
    r.register("test.after", async ({ tx, timer, afterCommit }) => {
      await tx`insert into test_fires (timer_id, name, runner) values (${timer.id}::bigint, 'after', 0)`;
      afterCommit(() => ran.push(`attempt ${timer.attempts + 1}`));
      if (failNext) {
        failNext = false;
        throw new Error("rolled back after afterCommit was asked for");
      }
    });
    await start(r);
    await r.schedule(db.sql, { kind: "test.after", delayMs: 0 });
    await waitUntil(
      "the timer to fire on its second attempt",
      async () => (await fireCounts(db.sql)).get("after") === 1,
    );
    await waitUntil("the after-commit work to run", () => ran.length > 0);
    // The first attempt rolled back: its insert and its after-commit work are gone; the retry ran both.
    expect(ran).toEqual(["attempt 2"]);
  });
});

describe("failing handlers", () => {
  test("a failing handler is retried with backoff, its error recorded, and fires once when it succeeds", async () => {
    const logs: string[] = [];
    const attempts: number[] = [];
    const backoffs: number[] = [];
    const r = registerFire(
      testRunner(
        db,
        {
          backoff: (n) => {
            backoffs.push(n);
            return 100 * n;
          },
        },
        logs,
      ),
      (name) => {
        attempts.push(Date.now());
        if (name === "flaky" && attempts.length <= 2) throw new Error(`carrier timeout #${attempts.length}`);
      },
    );
    await start(r);
    await r.schedule(db.sql, { kind: "test.fire", delayMs: 0, payload: { name: "flaky" } });
    await waitUntil("the first failed attempt to be recorded", async () => {
      const [row] = await db.sql<{ attempts: number }[]>`select attempts from timers`;
      return row?.attempts === 1;
    });
    const [first] = await db.sql<{ attempts: number; last_error: string; status: string }[]>`
      select attempts, last_error, status from timers`;
    expect(first).toEqual({ attempts: 1, last_error: "carrier timeout #1", status: "pending" });
    await waitUntil(
      "the flaky timer to fire after two retries",
      async () => (await fireCounts(db.sql)).get("flaky") === 1,
    );
    expect(backoffs).toEqual([1, 2]);
    // Second retry waited for the second backoff (200 ms), which is longer than the first (100 ms).
    expect(attempts[1]! - attempts[0]!).toBeGreaterThanOrEqual(90);
    expect(attempts[2]! - attempts[1]!).toBeGreaterThanOrEqual(190);
    expect((await db.sql`select id from timers`).length).toBe(0);
    const warnings = logs.filter((l) => l.includes("timer handler failed; will retry"));
    expect(warnings.length).toBe(2);
    expect(warnings[1]).toContain("carrier timeout #2");
  });

  test("past maxAttempts a timer is kept as failed with its last error, and logged as an error", async () => {
    const logs: string[] = [];
    const r = testRunner(db, { maxAttempts: 3, backoff: () => 10 }, logs);
    r.register("test.broken", async () => {
      throw new Error("always broken");
    });
    await start(r);
    await r.schedule(db.sql, { kind: "test.broken", delayMs: 0, payload: {} });
    await waitUntil("the timer to be marked failed", async () => {
      const [row] = await db.sql<{ status: string }[]>`select status from timers`;
      return row?.status === "failed";
    });
    const [row] = await db.sql<
      { attempts: number; last_error: string }[]
    >`select attempts, last_error from timers`;
    expect(row).toEqual({ attempts: 3, last_error: "always broken" });
    expect(logs.some((l) => l.includes('"level":"error"') && l.includes("timer failed for good"))).toBe(true);
    // A failed row is not fired again.
    await Bun.sleep(150);
    const [again] = await db.sql<{ attempts: number }[]>`select attempts from timers`;
    expect(again!.attempts).toBe(3);
  });

  test("a timer of an unknown kind is not lost: it fails with a recorded error", async () => {
    const r = testRunner(db, { backoff: () => 60_000 });
    await start(r);
    await r.schedule(db.sql, { kind: "nobody.handles.this", delayMs: 0, payload: {} });
    await waitUntil("the first failed attempt to be recorded", async () => {
      const [row] = await db.sql<{ attempts: number }[]>`select attempts from timers`;
      return row?.attempts === 1;
    });
    const [row] = await db.sql<{ last_error: string }[]>`select last_error from timers`;
    expect(row!.last_error).toContain('no handler registered for timer kind "nobody.handles.this"');
  });

  test("one failing handler in a batch does not hold back the others", async () => {
    const r = registerFire(testRunner(db, { batchSize: 50, backoff: () => 60_000 }), (name) => {
      if (name === "bad") throw new Error("bad one");
    });
    await start(r);
    for (let i = 0; i < 30; i++)
      await r.schedule(db.sql, { kind: "test.fire", delayMs: 50, payload: { name: `ok${i}` } });
    await r.schedule(db.sql, { kind: "test.fire", delayMs: 50, payload: { name: "bad" } });
    await waitUntil("the 30 timers to fire", async () => (await fireCounts(db.sql)).size === 30);
    await waitUntil(
      "the failing timer's error to be recorded",
      async () => (await db.sql`select 1 from timers where last_error is not null`).length === 1,
    );
    const counts = await fireCounts(db.sql);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    const rows = await db.sql<{ last_error: string }[]>`select last_error from timers`;
    expect([...rows]).toEqual([{ last_error: "bad one" }]);
  });
});

describe("shutdown", () => {
  test("stop waits for handlers in flight, stops claiming, and hands back the leases of unfired timers", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inFlight = false;
    // A horizon wide enough that `later` is leased and in the wheel at once, yet never due here.
    const r = registerFire(testRunner(db, { horizonMs: 60_000 }), async (name) => {
      if (name !== "slow") return;
      inFlight = true;
      await gate;
    });
    await start(r);
    await r.schedule(db.sql, { kind: "test.fire", delayMs: 0, payload: { name: "slow" } });
    await r.schedule(db.sql, { kind: "test.fire", delayMs: 30_000, payload: { name: "later" } });
    await waitUntil("the slow handler to be in flight", () => inFlight);
    let stopped = false;
    const stopping = r.stop().then(() => {
      stopped = true;
    });
    await Bun.sleep(50);
    expect(stopped).toBe(false);
    release();
    await stopping;
    running.splice(0);
    expect((await fireCounts(db.sql)).get("slow")).toBe(1);
    const rows = await db.sql<{ locked_by: number | null }[]>`select locked_by from timers`;
    expect([...rows]).toEqual([{ locked_by: null }]);
    // Due now and nobody's: a runner still claiming would fire it.
    await db.sql`update timers set due_at = now()`;
    await Bun.sleep(300);
    expect((await fireCounts(db.sql)).get("later")).toBeUndefined();
  });

  // One session on the embedded database: no other transaction can hold a row there.
  test.skipIf(TEST_DATABASE === "embedded")(
    "stop hands back its leases without waiting for a row another transaction holds, which keeps its lease",
    async () => {
      const r = registerFire(testRunner(db, { horizonMs: 60_000 }), async () => {});
      await start(r);
      const held = await r.schedule(db.sql, {
        kind: "test.fire",
        delayMs: 30_000,
        payload: { name: "held" },
      });
      await r.schedule(db.sql, { kind: "test.fire", delayMs: 30_000, payload: { name: "free" } });
      await waitUntil(
        "both timers to be leased",
        async () => (await db.sql`select 1 from timers where locked_by is not null`).length === 2,
      );
      // Another transaction holds one of the rows (as a shared transaction deleting a cancelled timer
      // does) until the stop has returned.
      let locked: () => void = () => {};
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      let end: () => void = () => {};
      const ended = new Promise<void>((resolve) => {
        end = resolve;
      });
      const holding = db.sql.begin(async (tx) => {
        await tx`select id from timers where id = ${held.id}::bigint for update`;
        locked();
        await ended;
      });
      await isLocked;
      const stopped = await Promise.race([
        r.stop().then(() => "stopped"),
        Bun.sleep(5_000).then(() => "still waiting"),
      ]);
      end();
      await holding;
      running.splice(0);
      expect(stopped).toBe("stopped");
      const rows = await db.sql<{ name: string; leased: boolean }[]>`
        select payload->>'name' as name, locked_by is not null as leased from timers order by name`;
      expect([...rows]).toEqual([
        { name: "free", leased: false },
        { name: "held", leased: true },
      ]);
    },
  );
});
