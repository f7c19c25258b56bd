import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import type { Db } from "../../src/db/engine/connection.ts";
import { gathered } from "../../src/db/engine/gathered.ts";
import { insertReservation, settleOpenReservation } from "../../src/db/minutes.ts";
import { insertOrganization } from "../../src/db/organizations.ts";
import { deleteTimer, insertTimer } from "../../src/db/timers.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";
import { fulfilled, inOneSharedTransaction } from "../helpers/sharedJobs.ts";

/**
 * What the jobs of a shared transaction each insert goes out as one statement (db/engine/gathered.ts),
 * each job getting its own part of the answer; anywhere else each caller's statement runs at once.
 */

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`create table gathered_probe (n integer primary key, by text not null)`;
});
afterAll(() => db.close());
beforeEach(async () => {
  await db.sql`delete from gathered_probe`;
});

/** The statements `insertProbes` ran, each with the items it was given. */
let statements: number[][] = [];

/** Inserts `ns` for `by` through `gathered`, answering each item's row as the statement returned it. */
function insertProbes(tx: Db, by: string, ns: number[]) {
  return gathered(
    tx,
    "probes",
    ns.map((n) => ({ n, by })),
    async (t, items) => {
      statements.push(items.map((i) => i.n));
      const rows = await t<{ n: number; by: string }[]>`
      insert into gathered_probe (n, by)
      select * from unnest(${items.map((i) => i.n)}::int[], ${items.map((i) => i.by)}::text[])
      returning n, by`;
      return rows;
    },
  );
}

test("outside a shared transaction each caller's items are one statement of their own, at once", async () => {
  statements = [];
  const [a, b] = await Promise.all([insertProbes(db.sql, "a", [1, 2]), insertProbes(db.sql, "b", [3])]);
  expect(a).toEqual([
    { n: 1, by: "a" },
    { n: 2, by: "a" },
  ]);
  expect(b).toEqual([{ n: 3, by: "b" }]);
  expect(statements.sort()).toEqual([[1, 2], [3]]);
});

test("the jobs of a shared transaction send one statement, and each gets its own rows back", async () => {
  statements = [];
  const answers = fulfilled(
    await inOneSharedTransaction(db.sql, [
      (tx) => insertProbes(tx, "a", [1, 2]),
      (tx) => insertProbes(tx, "b", [3]),
      (tx) => insertProbes(tx, "c", [4, 5, 6]),
    ]),
  );
  expect(statements).toEqual([[1, 2, 3, 4, 5, 6]]);
  expect(answers.map((rows) => rows.map((r) => `${r.by}${r.n}`))).toEqual([
    ["a1", "a2"],
    ["b3"],
    ["c4", "c5", "c6"],
  ]);
  expect((await db.sql`select count(*)::int as n from gathered_probe`)[0]!.n).toBe(6);
});

test("what a job gathers after its first statement answered goes in a later statement of the same transaction", async () => {
  statements = [];
  const answers = fulfilled(
    await inOneSharedTransaction(db.sql, [
      async (tx) => {
        await insertProbes(tx, "a", [1]);
        return insertProbes(tx, "a", [2]);
      },
      (tx) => insertProbes(tx, "b", [3]),
    ]),
  );
  expect(statements).toEqual([[1, 3], [2]]);
  expect(answers).toEqual([[{ n: 2, by: "a" }], [{ n: 3, by: "b" }]]);
});

test("a gathered statement the database refuses fails every job in it; each then runs alone and only the bad one fails", async () => {
  await db.sql`insert into gathered_probe values (7, 'before')`;
  statements = [];
  const [a, b, c] = await inOneSharedTransaction(db.sql, [
    (tx) => insertProbes(tx, "a", [1]),
    (tx) => insertProbes(tx, "b", [7]),
    (tx) => insertProbes(tx, "c", [3]),
  ]);
  expect(a!.status).toBe("fulfilled");
  expect(c!.status).toBe("fulfilled");
  expect(((b as PromiseRejectedResult).reason as { code?: string }).code).toBe("23505");
  // The shared one, then each alone.
  expect(statements[0]).toEqual([1, 7, 3]);
  expect(statements.slice(1).sort()).toEqual([[1], [3], [7]]);
  const rows = await db.sql<{ n: number; by: string }[]>`select n, by from gathered_probe order by n`;
  expect(rows.map((r) => `${r.by}${r.n}`)).toEqual(["a1", "c3", "before7"]);
});

test("an answer without one row per item is an error, shared and then alone", async () => {
  const [a, b] = await inOneSharedTransaction(db.sql, [
    (tx) => gathered(tx, "short", [1], async () => []),
    (tx) => gathered(tx, "short", [2], async () => []),
  ]);
  for (const s of [a!, b!]) {
    expect(s.status).toBe("rejected");
    expect(((s as PromiseRejectedResult).reason as Error).message).toContain("answered 0 rows for");
  }
});

test("timers inserted and deleted by the jobs of a shared transaction: each job gets its own timer and its own answer", async () => {
  const kept = await insertTimer(db.sql, { kind: "test.kept", delayMs: 60_000, payload: { name: "kept" } });
  const answers = fulfilled(
    await inOneSharedTransaction(db.sql, [
      (tx) => insertTimer(tx, { kind: "test.a", delayMs: 60_000, payload: { name: "a" } }),
      (tx) => insertTimer(tx, { kind: "test.b", at: new Date(Date.now() + 120_000), payload: { name: "b" } }),
      (tx) => insertTimer(tx, { kind: "test.c", delayMs: 30_000, payload: { name: "c" } }),
    ]),
  );
  expect(answers.map((t) => [t.kind, t.payload.name])).toEqual([
    ["test.a", "a"],
    ["test.b", "b"],
    ["test.c", "c"],
  ]);
  const stored = await db.sql<{ id: string; kind: string; payload: { name: string } }[]>`
    select id::text as id, kind, payload from timers where kind like 'test.%'`;
  for (const t of answers) {
    expect(stored.find((s) => s.id === t.id)?.payload.name).toBe(t.payload.name as string);
  }
  const deleted = fulfilled(
    await inOneSharedTransaction(db.sql, [
      (tx) => deleteTimer(tx, answers[0]!.id),
      (tx) => deleteTimer(tx, "999999999"),
      (tx) => deleteTimer(tx, kept.id),
    ]),
  );
  expect(deleted).toEqual([true, false, true]);
  const left = await db.sql<
    { kind: string }[]
  >`select kind from timers where kind like 'test.%' order by kind`;
  expect(left.map((r) => r.kind)).toEqual(["test.b", "test.c"]);
});

test("reservations settled by the jobs of a shared transaction: each job gets its own settlement, or null", async () => {
  const org = await insertOrganization(db.sql, {
    id: "org_gathered",
    name: "Gathered",
    paid_plan: true,
    plan_minutes: 100,
    sip_trunk_id: null,
    caller_number: null,
    allowed_countries: null,
    call_window: null,
    max_concurrent_calls: 10,
    max_calls_per_hour: 100,
    created_at: new Date(),
  });
  for (const [callId, reserved] of [
    ["call_a", 5],
    ["call_b", 7],
    ["call_c", 9],
  ] as const) {
    await insertReservation(db.sql, {
      call_id: callId,
      organization_id: org.id,
      publishable_key_id: null,
      plan_charged: true,
      month: "2026-12-01",
      reserved_minutes: reserved,
      max_seconds: reserved * 60,
      created_at: new Date(),
    });
  }
  const at = new Date();
  // call_c is settled already: the shared statement finds it closed.
  await settleOpenReservation(db.sql, "call_c", 1, at);
  const settled = fulfilled(
    await inOneSharedTransaction(db.sql, [
      (tx) => settleOpenReservation(tx, "call_a", 2, at),
      (tx) => settleOpenReservation(tx, "call_c", 3, at),
      (tx) => settleOpenReservation(tx, "call_b", 99, at),
      (tx) => settleOpenReservation(tx, "call_none", 1, at),
    ]),
  );
  expect(settled.map((r) => r && [r.reserved_minutes, r.kept_minutes])).toEqual([[5, 2], null, [7, 7], null]);
  const rows = await db.sql<{ call_id: string; kept_minutes: number; plan_return_pending: boolean }[]>`
    select call_id, kept_minutes, plan_return_pending from minute_reservations order by call_id`;
  expect(rows.map((r) => [r.call_id, r.kept_minutes, r.plan_return_pending])).toEqual([
    ["call_a", 2, true],
    ["call_b", 7, false],
    ["call_c", 1, true],
  ]);
});
