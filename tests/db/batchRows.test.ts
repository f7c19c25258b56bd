import { afterAll, beforeAll, expect, test } from "bun:test";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";

/**
 * `batch_rows` (sql/0012): the rows of a statement that writes several requests at once. The plan a
 * prepared statement keeps for it must look each row up by key, however small the tables were when
 * the plan was made, since they grow afterwards.
 */

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`create table batch_probe (id integer primary key, v text)`;
  await db.sql`insert into batch_probe select n, 'v' || n from generate_series(1, 20) n`;
});
afterAll(() => db.close());

/** The generic plan (the one a prepared statement keeps) of a join of `rows` with the small table. */
async function keptPlan(rows: string): Promise<string> {
  return db.sql.begin(async (tx) => {
    await tx`set local plan_cache_mode = force_generic_plan`;
    await tx.unsafe(`prepare probe_join(json) as select p.v from ${rows} join batch_probe p on p.id = r.id`);
    const plan = await tx.unsafe<{ "QUERY PLAN": string }[]>(`explain execute probe_join('[{"id": 3}]')`);
    await tx`deallocate probe_join`;
    return plan.map((r) => r["QUERY PLAN"]).join("\n");
  });
}

test("the kept plan of a join with batch_rows looks rows up by key, even in a small table", async () => {
  const plan = await keptPlan("batch_rows($1) e cross join lateral json_to_record(e) as r(id integer)");
  expect(plan).toContain("Index Scan using batch_probe_pkey");
  expect(plan).not.toContain("Seq Scan on batch_probe");
  // What it replaces: taken to return 100 rows, json_to_recordset gets the small table scanned whole,
  // a plan that would be kept as the table grows.
  expect(await keptPlan("json_to_recordset($1) as r(id integer)")).toContain("Seq Scan on batch_probe");
});

test("one value per element, in order; nothing for an empty array or null", async () => {
  const rows = await db.sql<{ id: number; v: string }[]>`
    select r.id, r.v from batch_rows(${db.sql.json([
      { id: 2, v: "b" },
      { id: 1, v: "a" },
    ])}::json) e cross join lateral json_to_record(e) as r(id integer, v text)`;
  expect(rows.map((r) => [r.id, r.v])).toEqual([
    [2, "b"],
    [1, "a"],
  ]);
  expect((await db.sql`select * from batch_rows('[]'::json)`).length).toBe(0);
  expect((await db.sql`select * from batch_rows(null)`).length).toBe(0);
});
