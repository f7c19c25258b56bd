import { afterAll, beforeAll, expect, test } from "bun:test";
import { withCustomPlans } from "../../src/db/connection.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";

/**
 * Statements over sets of rows are planned at each execution, for the tables as they are then; the
 * request pool's statements keep their cached plans, before, during and after.
 */

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
}, 30_000);
afterAll(() => db.close());

const modeOf = (sql: TestDatabase["sql"]) =>
  sql<{ mode: string }[]>`select current_setting('plan_cache_mode') as mode`.then((r) => r[0]!.mode);

/** The setting on every connection of the request pool, read by enough queries at once to reach them all. */
async function requestPoolModes(): Promise<string[]> {
  const seen = await Promise.all(Array.from({ length: 12 }, () => modeOf(db.sql)));
  return [...new Set(seen)];
}

test("statements in fn get custom plans; the request pool keeps the default", async () => {
  const inside = await withCustomPlans(db.sql, async (conn) => ({
    mode: await modeOf(conn),
    // The embedded database's one session is fn's until it returns.
    during: db.kind === "postgres" ? await requestPoolModes() : ["auto"],
  }));
  expect(inside.mode).toBe("force_custom_plan");
  expect(inside.during).toEqual(["auto"]);
  expect(await requestPoolModes()).toEqual(["auto"]);
});

test("many at once, each gets custom plans", async () => {
  const seen = await Promise.all(Array.from({ length: 10 }, () => withCustomPlans(db.sql, modeOf)));
  expect([...new Set(seen)]).toEqual(["force_custom_plan"]);
  expect(await requestPoolModes()).toEqual(["auto"]);
});

test("a failing statement in fn is passed on, and the request pool keeps the default", async () => {
  const err = await withCustomPlans(db.sql, async (conn) => {
    await conn`select 1 / 0`;
  }).catch((e: Error) => e);
  expect(String(err)).toContain("division by zero");
  expect(await requestPoolModes()).toEqual(["auto"]);
});
