import { afterAll, beforeAll, expect, test } from "bun:test";
import { connectionLost, pipelinedTransaction, settledAll } from "../../src/db/engine/connection.ts";
import { createTestDatabase, TEST_DATABASE, type TestDatabase } from "../helpers/db.ts";

/** The one way the service opens a transaction: begin sent with the first statement, all or nothing. */

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`create table tx_probe (n integer primary key)`;
});
afterAll(() => db.close());

/** "committed", "refused <code>", or "no answer" after 10 s: a transaction that must end either way. */
function settledWithin(transaction: Promise<unknown>): Promise<string> {
  return Promise.race([
    transaction.then(
      () => "committed",
      (e: { code?: string }) => `refused ${e.code}`,
    ),
    Bun.sleep(10_000).then(() => "no answer"),
  ]);
}

const count = async () => (await db.sql<{ n: number }[]>`select count(*)::int as n from tx_probe`)[0]!.n;

test("commits every statement, pipelined ones included, and returns fn's value", async () => {
  const value = await pipelinedTransaction(db.sql, async (tx) => {
    await Promise.all([tx`insert into tx_probe values (1)`, tx`insert into tx_probe values (2)`]);
    const [row] = await tx<{ n: number }[]>`select count(*)::int as n from tx_probe`;
    return row!.n;
  });
  expect(value).toBe(2);
  expect(await count()).toBe(2);
  await db.sql`delete from tx_probe`;
});

test("a throw after writes rolls them back and passes the error on", async () => {
  const err = await pipelinedTransaction(db.sql, async (tx) => {
    await tx`insert into tx_probe values (10)`;
    throw new Error("refused after the write");
  }).catch((e) => e);
  expect((err as Error).message).toBe("refused after the write");
  expect(await count()).toBe(0);
});

test("an invalid Date behind another statement fails its statement and the transaction, and nothing waits", async () => {
  // The driver would throw while building the message, leaving the statement unanswered for ever; the
  // connection's Date serializer sends text PostgreSQL refuses instead.
  const outcome = await settledWithin(
    pipelinedTransaction(db.sql, async (tx) => {
      const [, bad] = await settledAll([
        tx`insert into tx_probe values (30)`,
        tx`select ${new Date(Number.NaN)}::timestamptz as at`,
      ] as const);
      return bad;
    }),
  );
  expect(outcome).toBe("refused 22007");
  expect(await count()).toBe(0);
  // The pool goes on, every connection of it.
  const answers = await Promise.all(Array.from({ length: 8 }, () => db.sql`select 1 as one`));
  expect(answers.map((r) => r[0]!.one)).toEqual(Array(8).fill(1));
});

test("a statement the server refuses rolls back the ones before it", async () => {
  const err = await pipelinedTransaction(db.sql, async (tx) => {
    await tx`insert into tx_probe values (20)`;
    await tx`insert into tx_probe values (20)`; // duplicate key
  }).catch((e) => e);
  expect((err as { code?: string }).code).toBe("23505");
  expect(await count()).toBe(0);
});

test("statements sent together: the one that failed is the error, not the ones it aborted after it", async () => {
  await db.sql`delete from tx_probe`;
  await db.sql`insert into tx_probe values (40)`;
  const err = await pipelinedTransaction(db.sql, (tx) =>
    // The first one in the order given is aborted (25P02) by the duplicate sent before it.
    settledAll([
      new Promise<void>((resolve) => setTimeout(resolve, 0)).then(() => tx`insert into tx_probe values (42)`),
      tx`insert into tx_probe values (40)`,
    ] as const),
  ).catch((e) => e);
  expect((err as { code?: string }).code).toBe("23505");
  expect(await count()).toBe(1);
  await db.sql`delete from tx_probe`;
});

test("the first statement sent with begin can fail too; the connection goes back to the pool clean", async () => {
  const err = await pipelinedTransaction(db.sql, async (tx) => {
    await tx`select * from no_such_table`;
  }).catch((e) => e);
  expect((err as { code?: string }).code).toBe("42P01");
  // Every connection of the pool (one on the embedded database) is usable and outside a transaction.
  const states = await Promise.all(
    Array.from(
      { length: 8 },
      () => db.sql<{ s: string }[]>`select current_setting('transaction_isolation') as s`,
    ),
  );
  expect(states).toHaveLength(8);
  await pipelinedTransaction(db.sql, async (tx) => {
    await tx`insert into tx_probe values (30)`;
  });
  expect(await count()).toBe(1);
});

test("end.last: the last statement with the commit behind it commits everything, and fn's value comes back", async () => {
  await db.sql`delete from tx_probe`;
  const value = await pipelinedTransaction(db.sql, async (tx, end) => {
    await tx`insert into tx_probe values (50)`;
    const rows = await end.last(tx<{ n: number }[]>`insert into tx_probe values (51) returning n`);
    return rows[0]!.n;
  });
  expect(value).toBe(51);
  expect(await count()).toBe(2);
  await db.sql`delete from tx_probe`;
});

test("end.last: a last statement the server refuses rolls back the ones before it too", async () => {
  await db.sql`insert into tx_probe values (60)`;
  const err = await pipelinedTransaction(db.sql, async (tx, end) => {
    await tx`insert into tx_probe values (61)`;
    await end.last(tx`insert into tx_probe values (60)`); // duplicate key: the commit behind it rolls back
  }).catch((e) => e);
  expect((err as { code?: string }).code).toBe("23505");
  expect(await count()).toBe(1);
  // Every connection of the pool is back outside any transaction.
  await pipelinedTransaction(db.sql, async (tx) => {
    await tx`insert into tx_probe values (62)`;
  });
  expect(await count()).toBe(2);
  await db.sql`delete from tx_probe`;
});

test("end.last: an invalid Date in the last statement is refused by the server and nothing is kept", async () => {
  const outcome = await settledWithin(
    pipelinedTransaction(db.sql, async (tx, end) => {
      await tx`insert into tx_probe values (70)`;
      await end.last(
        tx`insert into tx_probe select 71 where ${new Date(Number.NaN)}::timestamptz is not null`,
      );
    }),
  );
  expect(outcome).toBe("refused 22007");
  expect(await count()).toBe(0);
});

test.skipIf(TEST_DATABASE === "embedded")(
  "end.last: the commit goes out before the last statement has answered (one round trip, not two)",
  async () => {
    // The driver's debug hook is called as each statement is written to the connection.
    let commitSentAt = 0;
    const pool = (await import("postgres")).default(db.url!, {
      max: 1,
      onnotice: () => {},
      debug: (_id, text) => {
        if (text === "commit") commitSentAt = performance.now();
      },
    });
    try {
      let sentAt = 0;
      let answeredAt = 0;
      await pipelinedTransaction(pool, async (tx, end) => {
        await tx`select 1`;
        sentAt = performance.now();
        // 300 ms at the database: a commit sent only once it answered would go out that much later.
        await end.last(tx`insert into tx_probe select 90 from pg_sleep(0.3)`);
        answeredAt = performance.now();
      });
      expect(answeredAt - sentAt).toBeGreaterThanOrEqual(290);
      expect(commitSentAt - sentAt).toBeLessThan(100);
      expect(await count()).toBe(1);
    } finally {
      await pool.end({ timeout: 1 });
      await db.sql`delete from tx_probe`;
    }
  },
);

test("end.last: nothing may go out after the last statement", async () => {
  const err = await pipelinedTransaction(db.sql, async (tx, end) => {
    await end.last(tx`insert into tx_probe values (80)`);
    await tx`insert into tx_probe values (81)`;
  }).catch((e) => e);
  expect((err as Error).message).toBe("a statement after the transaction's last one");
  // The commit had gone out: the last statement is kept, the one after it never ran.
  expect((await db.sql<{ n: number }[]>`select n from tx_probe order by n`).map((r) => r.n)).toEqual([80]);
  await db.sql`delete from tx_probe`;
});

test("concurrent transactions each see their own write and all commit", async () => {
  await db.sql`delete from tx_probe`;
  const seen = await Promise.all(
    [100, 200, 300].map((n) =>
      pipelinedTransaction(db.sql, async (tx) => {
        await tx`insert into tx_probe values (${n})`;
        const rows = await tx<{ n: number }[]>`select n from tx_probe order by n`;
        return rows.map((r) => r.n);
      }),
    ),
  );
  for (const [i, rows] of seen.entries()) expect(rows).toContain([100, 200, 300][i]!);
  expect(await count()).toBe(3);
});

// The embedded database has one connection: a second reader would wait for the first transaction.
test.skipIf(TEST_DATABASE === "embedded")(
  "an uncommitted write is invisible outside its transaction",
  async () => {
    await db.sql`delete from tx_probe`;
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inserted = () => {};
    const written = new Promise<void>((resolve) => {
      inserted = resolve;
    });
    const first = pipelinedTransaction(db.sql, async (tx) => {
      await tx`insert into tx_probe values (400)`;
      inserted();
      await gate;
    });
    await written;
    expect(await count()).toBe(0);
    release();
    await first;
    expect(await count()).toBe(1);
  },
);

test.skipIf(TEST_DATABASE === "embedded")(
  "PostgreSQL sessions never JIT-compile statements, whatever the server's setting",
  async () => {
    const sessions = await Promise.all(
      Array.from(
        { length: 4 },
        () => db.sql<{ setting: string; source: string }[]>`
          select setting, source from pg_settings where name = 'jit'`,
      ),
    );
    // Set by the connection itself ("client"), not inherited from the server's configuration.
    expect(sessions.map((r) => r[0])).toEqual(Array(4).fill({ setting: "off", source: "client" }));
  },
);

test.skipIf(TEST_DATABASE === "embedded")(
  "a connection the database closes mid-transaction: the error is passed on, the process lives, the pool goes on",
  async () => {
    const pool = (await import("postgres")).default(db.url!, { max: 2, onnotice: () => {} });
    const killer = (await import("postgres")).default(db.url!, { max: 1, onnotice: () => {} });
    try {
      for (let round = 0; round < 3; round++) {
        const err = await pipelinedTransaction(pool, async (tx) => {
          await tx`insert into tx_probe values (${100 + round})`;
          const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
          // Closed by the database while a statement runs.
          setTimeout(() => killer`select pg_terminate_backend(${row!.pid})`.execute(), 200);
          await tx`select pg_sleep(5)`;
        }).catch((e) => e);
        // The server's FATAL (57P01) or the driver's closed connection, never an uncaught failure.
        expect(connectionLost(err)).toBe(true);
        // Long enough for a write the driver scheduled on the dead connection to have run (it ended
        // the process before the fix).
        await new Promise((r) => setTimeout(r, 50));
        // The pool goes on and nothing of the transaction was kept. (The driver hands the server's
        // FATAL to the first statement on the reconnected connection, a stale error; one retry.)
        const count = async () => {
          for (let attempt = 0; ; attempt++) {
            try {
              return (
                await pool<
                  { n: number }[]
                >`select count(*)::int as n from tx_probe where n between 100 and 102`
              )[0]!.n;
            } catch (e) {
              if (!connectionLost(e) || attempt >= 2) throw e;
            }
          }
        };
        expect(await Promise.all([count(), count(), count(), count()])).toEqual([0, 0, 0, 0]);
      }
    } finally {
      await pool.end({ timeout: 1 });
      await killer.end({ timeout: 1 });
    }
  },
);

test.skipIf(TEST_DATABASE === "embedded")(
  "a connection closed while the transaction waits between statements: its later statements are refused, none runs outside it",
  async () => {
    const postgres = (await import("postgres")).default;
    // One connection: the pool reconnects the very connection the transaction held.
    const pool = postgres(db.url!, { max: 1, onnotice: () => {} });
    const killer = postgres(db.url!, { max: 1, onnotice: () => {} });
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    try {
      const err = await pipelinedTransaction(pool, async (tx) => {
        await tx`insert into tx_probe values (200)`;
        const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
        await killer`select pg_terminate_backend(${row!.pid})`;
        await sleep(100);
        // Someone else's statement meanwhile: the pool reconnects the closed connection for it.
        await pool`select 1`.catch(() => {});
        await tx`insert into tx_probe values (201)`;
      }).catch((e) => e);
      expect(connectionLost(err)).toBe(true);
      await sleep(50);
      const [row] = await db.sql<
        { n: number }[]
      >`select count(*)::int as n from tx_probe where n in (200, 201)`;
      expect(row!.n).toBe(0);
      // The pool goes on.
      expect((await pool<{ one: number }[]>`select 1 as one`)[0]!.one).toBe(1);
    } finally {
      await pool.end({ timeout: 1 });
      await killer.end({ timeout: 1 });
    }
  },
);

test("a socket error (a reset, a broken pipe) is a lost connection; a statement's refusal is not", () => {
  expect(
    connectionLost(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET", syscall: "read" })),
  ).toBe(true);
  expect(connectionLost(Object.assign(new Error("write EPIPE"), { code: "EPIPE", errno: -32 }))).toBe(true);
  expect(connectionLost(Object.assign(new Error("x"), { code: "CONNECTION_DESTROYED" }))).toBe(true);
  expect(connectionLost(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false);
  expect(connectionLost(new Error("plain"))).toBe(false);
  expect(connectionLost(null)).toBe(false);
});
