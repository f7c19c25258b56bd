import { afterAll, beforeAll, expect, test } from "bun:test";
import { withCustomPlans } from "../../src/db/connection.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";

/** Statements over sets of rows are planned at each execution, on a connection reset afterwards. */

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
}, 30_000);
afterAll(() => db.close());

interface Setting {
  pid: number;
  mode: string;
}
const settingOf = (sql: TestDatabase["sql"]) =>
  sql<Setting[]>`select pg_backend_pid() as pid, current_setting('plan_cache_mode') as mode`.then(
    (r) => r[0]!,
  );

/** The setting on the connection of `pid`, read from the pool once that connection serves a query. */
async function settingAfterwards(pid: number): Promise<string> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const seen = await Promise.all(Array.from({ length: 12 }, () => settingOf(db.sql)));
    const same = seen.find((s) => s.pid === pid);
    if (same) return same.mode;
  }
  throw new Error(`connection ${pid} never served a query again`);
}

test("statements in fn get custom plans; the connection is back to the default afterwards", async () => {
  const inside = await withCustomPlans(db.sql, (conn) => settingOf(conn));
  expect(inside.mode).toBe("force_custom_plan");
  expect(await settingAfterwards(inside.pid)).toBe("auto");
});

test("a failing statement in fn is passed on, and the connection is reset as well", async () => {
  let pid = 0;
  const err = await withCustomPlans(db.sql, async (conn) => {
    pid = (await settingOf(conn)).pid;
    await conn`select 1 / 0`;
  }).catch((e: Error) => e);
  expect(String(err)).toContain("division by zero");
  expect(await settingAfterwards(pid)).toBe("auto");
});
