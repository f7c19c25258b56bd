import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import type { Db } from "../../src/db/engine/connection.ts";
import { SharedTransactions } from "../../src/db/engine/sharedTransactions.ts";
import { createLogger } from "../../src/log.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";

/**
 * Short transactions of concurrent callers run as one (db/engine/sharedTransactions.ts): what arrives
 * while one runs goes out together, and each job gets the answer it would have had alone.
 */

let db: TestDatabase;
const warnings: string[] = [];
const log = createLogger("warn", (line) => warnings.push(line));

beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`create table shared_probe (n integer primary key)`;
});
afterAll(() => db.close());
beforeEach(async () => {
  await db.sql`delete from shared_probe`;
  warnings.length = 0;
});

const rows = async () =>
  (await db.sql<{ n: number }[]>`select n from shared_probe order by n`).map((r) => r.n);

/** A job that writes `n` and answers the id of the transaction it ran in. */
const insert = (n: number) => async (tx: Db) => {
  const [row] = await tx<
    { xid: string }[]
  >`insert into shared_probe values (${n}) returning txid_current()::text as xid`;
  return row!.xid;
};

/** One job under way until `open()`: the jobs started meanwhile wait for it, then go out together. */
function holding(shared: SharedTransactions) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const first = shared.run(["first"], async (tx) => {
    const xid = await insert(0)(tx);
    await gate;
    return xid;
  });
  return { first, open };
}

/** Three jobs started while one runs (one shared transaction unless keys say otherwise), settled. */
async function threeBehindOne(shared: SharedTransactions, jobs: (() => Promise<string>)[]) {
  const { first, open } = holding(shared);
  await Bun.sleep(20);
  const started = jobs.map((job) => job());
  open();
  await first;
  return (await Promise.allSettled(started)) as [
    PromiseSettledResult<string>,
    PromiseSettledResult<string>,
    PromiseSettledResult<string>,
  ];
}

test("jobs that arrive while one runs share one transaction, and each is committed when it resolves", async () => {
  const shared = new SharedTransactions(db.sql, log, { maxBatch: 64, maxInFlight: 1 });
  const { first, open } = holding(shared);
  await Bun.sleep(20);
  const later = [1, 2, 3].map((n) => shared.run([`k${n}`], insert(n)));
  open();
  const [xid0, ...xids] = await Promise.all([first, ...later]);
  expect(new Set(xids).size).toBe(1);
  expect(xids[0]).not.toBe(xid0);
  expect(await rows()).toEqual([0, 1, 2, 3]);
});

test("a job the database refuses fails alone with its own error; the others are committed, each by itself", async () => {
  await db.sql`insert into shared_probe values (7)`;
  const shared = new SharedTransactions(db.sql, log, { maxBatch: 64, maxInFlight: 1 });
  const [a, b, c] = await threeBehindOne(shared, [
    () => shared.run(["a"], insert(1)),
    () => shared.run(["b"], insert(7)),
    () => shared.run(["c"], insert(3)),
  ]);
  expect(a.status).toBe("fulfilled");
  expect(c.status).toBe("fulfilled");
  expect(((b as PromiseRejectedResult).reason as { code?: string }).code).toBe("23505");
  // Run again alone after the shared attempt was rolled back.
  expect((a as PromiseFulfilledResult<string>).value).not.toBe((c as PromiseFulfilledResult<string>).value);
  expect(await rows()).toEqual([0, 1, 3, 7]);
  // A job's own failure is its caller's to report: no warning of a refused batch.
  expect(warnings).toEqual([]);
});

test("a job that throws after writing leaves nothing of it; the others are committed", async () => {
  const shared = new SharedTransactions(db.sql, log, { maxBatch: 64, maxInFlight: 1 });
  const [a, b, c] = await threeBehindOne(shared, [
    () => shared.run(["a"], insert(1)),
    () =>
      shared.run(["b"], async (tx) => {
        await insert(5)(tx);
        throw new Error("refused after its write");
      }),
    () => shared.run(["c"], insert(3)),
  ]);
  expect([a.status, c.status]).toEqual(["fulfilled", "fulfilled"]);
  expect(((b as PromiseRejectedResult).reason as Error).message).toBe("refused after its write");
  expect(await rows()).toEqual([0, 1, 3]);
});

test("jobs that share a key never share a transaction", async () => {
  const shared = new SharedTransactions(db.sql, log, { maxBatch: 64, maxInFlight: 1 });
  const { first, open } = holding(shared);
  await Bun.sleep(20);
  const jobs = [
    shared.run(["call_x"], insert(1)),
    shared.run(["call_x"], insert(2)),
    shared.run(["y"], insert(3)),
  ];
  open();
  await first;
  const [x1, x2, y] = await Promise.all(jobs);
  expect(x1).not.toBe(x2);
  expect(y).toBe(x1);
  expect(await rows()).toEqual([0, 1, 2, 3]);
});

test("twenty jobs at once: every one committed exactly once, in fewer transactions than jobs", async () => {
  const shared = new SharedTransactions(db.sql, log, { maxBatch: 64, maxInFlight: 2 });
  const xids = await Promise.all(Array.from({ length: 20 }, (_, i) => shared.run([`k${i}`], insert(i + 1))));
  expect(await rows()).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  expect(new Set(xids).size).toBeLessThan(20);
});

test("with gatherMs, jobs that arrive a few milliseconds apart on an idle database share one transaction", async () => {
  const shared = new SharedTransactions(db.sql, log, { maxBatch: 16, maxInFlight: 4, gatherMs: 40 });
  const started: Promise<string>[] = [];
  for (const n of [1, 2, 3]) {
    started.push(shared.run([`k${n}`], insert(n)));
    await Bun.sleep(5);
  }
  const xids = await Promise.all(started);
  expect(new Set(xids).size).toBe(1);
  expect(await rows()).toEqual([1, 2, 3]);
  // Without the window, the same jobs each run alone: nothing else was under way when they came.
  const alone = new SharedTransactions(db.sql, log, { maxBatch: 16, maxInFlight: 4 });
  const apart: string[] = [];
  for (const n of [4, 5, 6]) {
    apart.push(await alone.run([`k${n}`], insert(n)));
    await Bun.sleep(5);
  }
  expect(new Set(apart).size).toBe(3);
});
