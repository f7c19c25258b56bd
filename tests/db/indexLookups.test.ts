import { afterAll, beforeAll, expect, test } from "bun:test";
import { withIndexLookups } from "../../src/db/connection.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";

/**
 * Statements over sets of rows are planned for index lookups, whatever the size of the tables when
 * their plan is made, on a connection that is reset afterwards.
 */

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`create table lookup_probe (id integer primary key, v text)`;
  await db.sql`insert into lookup_probe select n, 'v' || n from generate_series(1, 20) n`;
}, 30_000);
afterAll(() => db.close());

interface Settings {
  pid: number;
  settings: string;
}
const settingsOf = (sql: TestDatabase["sql"]) =>
  sql<Settings[]>`
    select pg_backend_pid() as pid,
      concat_ws(' ', current_setting('enable_hashjoin'), current_setting('enable_mergejoin'),
        current_setting('enable_seqscan')) as settings`.then((r) => r[0]!);

/** The settings on the connection of `pid`, read from the pool once that connection serves a query. */
async function settingsAfterwards(pid: number): Promise<string> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const seen = await Promise.all(Array.from({ length: 12 }, () => settingsOf(db.sql)));
    const same = seen.find((s) => s.pid === pid);
    if (same) return same.settings;
  }
  throw new Error(`connection ${pid} never served a query again`);
}

/** The plan of a join of a set of ids with a small table, as the planner makes it on `sql`. */
async function planOf(sql: TestDatabase["sql"]): Promise<string> {
  const rows = await sql<{ "QUERY PLAN": string }[]>`
    explain select p.v from json_to_recordset(${sql.json([{ id: 3 }, { id: 5 }])}::json) as r(id integer)
      join lookup_probe p on p.id = r.id`;
  return rows.map((r) => r["QUERY PLAN"]).join("\n");
}

test("in fn, joins look rows up by index; the connection is back to the defaults afterwards", async () => {
  // On its own the planner joins a small table by hashing a sequential scan of it.
  expect(await planOf(db.sql)).toContain("Seq Scan on lookup_probe");
  const inside = await withIndexLookups(db.sql, async (conn) => ({
    plan: await planOf(conn),
    ...(await settingsOf(conn)),
  }));
  expect(inside.plan).toContain("Index Scan using lookup_probe_pkey");
  expect(inside.plan).not.toContain("Seq Scan on lookup_probe");
  expect(inside.settings).toBe("off off off");
  expect(await settingsAfterwards(inside.pid)).toBe("on on on");
});

test("a failing statement in fn is passed on, and the connection is reset as well", async () => {
  let pid = 0;
  const err = await withIndexLookups(db.sql, async (conn) => {
    pid = (await settingsOf(conn)).pid;
    await conn`select 1 / 0`;
  }).catch((e: Error) => e);
  expect(String(err)).toContain("division by zero");
  expect(await settingsAfterwards(pid)).toBe("on on on");
});
