import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import type { TimerRunner } from "../../src/timers/runner.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";
import { waitUntil } from "../helpers/wait.ts";
import { createFiresTable, registerFire, testRunner } from "./support.ts";

/** Held timers: leased to the runner that schedules them whatever their due time, until it dies. */

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

async function start(r: TimerRunner) {
  running.push(r);
  await r.start();
  return r;
}

async function firedBy(): Promise<Map<number, number>> {
  const rows = await db.sql<{ runner: number; n: number }[]>`
    select runner, count(*)::int as n from test_fires group by runner`;
  return new Map(rows.map((r) => [r.runner, r.n]));
}

describe("hold", () => {
  test("held timers due past the horizon are fired by the runner that scheduled them, never another", async () => {
    const a = await start(registerFire(testRunner(db)));
    const b = await start(registerFire(testRunner(db)));
    for (let i = 0; i < 20; i++) {
      const held = i % 2 === 0;
      await a.schedule(db.sql, { kind: "test.fire", delayMs: 700, payload: { name: `t${i}` }, hold: held });
    }
    // Every held timer not yet fired is leased to `a`, from its insert on (the first may already have
    // fired when the scheduling is slow).
    const heldElsewhere = await db.sql<{ n: number }[]>`
      select count(*)::int as n from timers
      where (substring(payload->>'name' from 2))::int % 2 = 0 and locked_by is distinct from ${a.runnerId}`;
    expect(heldElsewhere[0]!.n).toBe(0);
    await waitUntil("every timer to fire", async () => (await db.sql`select 1 from timers`).length === 0);
    const held = await db.sql<{ runner: number }[]>`
      select runner from test_fires where (substring(name from 2))::int % 2 = 0`;
    expect(new Set(held.map((r) => r.runner))).toEqual(new Set([a.runnerId]));
    expect((await firedBy()).get(a.runnerId)! + ((await firedBy()).get(b.runnerId) ?? 0)).toBe(20);
  });

  test("a held timer of a runner that died is fired by another once due", async () => {
    const a = await start(registerFire(testRunner(db)));
    const { dueAt } = await a.schedule(db.sql, {
      kind: "test.fire",
      delayMs: 700,
      payload: { name: "orphan" },
      hold: true,
    });
    await a.abandon();
    running.splice(running.indexOf(a), 1);
    const b = await start(registerFire(testRunner(db)));
    await waitUntil("the orphan timer to fire", async () => (await firedBy()).get(b.runnerId) === 1);
    // Not before it was due, by the database's clock.
    const [row] = await db.sql<{ fired_at: Date }[]>`select fired_at from test_fires`;
    expect(row!.fired_at.getTime()).toBeGreaterThanOrEqual(dueAt.getTime());
  });
});
