import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sha256 } from "../../src/auth/keys.ts";
import { ManualClock } from "../../src/clock.ts";
import { rateLimitHitsSql } from "../../src/db/rateLimits.ts";
import { insertSessionToken } from "../../src/db/sessionTokens.ts";
import { analyzeTable, tablesWithStaleStatistics } from "../../src/db/statistics.ts";
import {
  BULK_CHANGE_ROWS,
  HOUSEKEEPING_EVERY_MS,
  housekeepingPass,
  RETENTION_BATCH,
  STATISTICS_EVERY_MS,
  scheduleHousekeeping,
} from "../../src/services/housekeeping.ts";
import { usedMinutes } from "../../src/services/minutes.ts";
import { WEB_CALL_RATE_LIMIT } from "../../src/services/rateLimit.ts";
import { registerTimerHandlers } from "../../src/timerHandlers.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { type PlanNode, readsOf } from "../helpers/plans.ts";
import { waitUntil } from "../helpers/wait.ts";
import { testRunner } from "./support.ts";

/**
 * Housekeeping: one periodic durable timer removes what has served its time (idempotency records,
 * expired session tokens, idle rate-limit windows, remembered bot-check tokens), never a request.
 */
const DAY = 24 * 3600_000;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

const pendingHousekeeping = async () =>
  (
    await ctx.db.sql<{ due_at: Date }[]>`
      select due_at from timers where kind = 'housekeeping' and status = 'pending'`
  ).map((r) => r.due_at);

describe("the housekeeping timer", () => {
  test("is one pending timer however many processes make sure of it, at once or not (statistics too)", async () => {
    await Promise.all(Array.from({ length: 8 }, () => scheduleHousekeeping(ctx.deps)));
    await scheduleHousekeeping(ctx.deps);
    expect(await pendingHousekeeping()).toHaveLength(1);
    const statistics = await ctx.db
      .sql`select 1 from timers where kind = 'statistics' and status = 'pending'`;
    expect(statistics).toHaveLength(1);
  });

  test("a pass removes what served its time, keeps the rest, and schedules the next pass", async () => {
    const sql = ctx.db.sql;
    const now = clock.now().getTime();
    const token = (n: number, expiresAt: number) => ({
      hash: sha256(`token-${n}`),
      organizationId: seed.org.id,
      livemode: false,
      secretKeyId: seed.test.id,
      agentId: seed.agent.id,
      variables: {},
      language: null,
      expiresAt: new Date(expiresAt),
      now: new Date(expiresAt - 300_000),
    });
    // Expired a day and more ago (gone), expired an hour ago (kept: a replay may still need it).
    await insertSessionToken(sql, token(1, now - DAY - 600_000));
    await insertSessionToken(sql, token(2, now - 3600_000));
    await sql`
      insert into session_idempotency_keys
        (organization_id, livemode, idempotency_key, request_hash, salt, token_hash, created_at)
      values (${seed.org.id}, false, 'old', ${sha256("a")}, 's', ${sha256("token-1")}, ${new Date(now - DAY - 1)}),
             (${seed.org.id}, false, 'new', ${sha256("b")}, 's', ${sha256("token-2")}, ${new Date(now - 60_000)})`;
    // An address whose hits all left the window (gone), one with a recent hit (kept).
    const hit = (address: string, at: number) =>
      sql`${rateLimitHitsSql(sql, WEB_CALL_RATE_LIMIT, sql`select ${address}::text as address, ${new Date(at)}::timestamptz as at`)}`;
    await hit("192.0.2.1", now - 3600_000);
    await hit("192.0.2.2", now - 60_000);

    await sql`update timers set due_at = now() where kind = 'housekeeping'`;
    const runner = testRunner(ctx.db);
    registerTimerHandlers(runner, { ...ctx.deps, timers: runner });
    await runner.start();
    try {
      await waitUntil("the pass to run and schedule the next one", async () => {
        const due = await pendingHousekeeping();
        return due.length === 1 && due[0]!.getTime() > Date.now() + HOUSEKEEPING_EVERY_MS / 2;
      });
    } finally {
      await runner.stop();
    }
    const tokens = await sql<{ token_hash: Uint8Array }[]>`select token_hash from session_tokens`;
    expect(tokens.map((t) => Buffer.from(t.token_hash).toString("hex"))).toEqual([
      Buffer.from(sha256("token-2")).toString("hex"),
    ]);
    expect(
      (await sql`select idempotency_key from session_idempotency_keys`).map((r) => r.idempotency_key),
    ).toEqual(["new"]);
    expect((await sql`select address from rate_limit_windows`).map((r) => r.address)).toEqual(["192.0.2.2"]);
  });
});

describe("plan minutes given back in an earlier month", () => {
  test("a pass takes them into that month's row; the current month's wait for its next lock", async () => {
    const sql = ctx.db.sql;
    const org = (await seedOrganization(ctx)).org.id;
    const row = async (month: string) =>
      (
        await sql<{ used_minutes: number }[]>`
          select used_minutes from minute_usage where kind = 'plan' and subject_id = ${org} and month = ${month}`
      )[0]!.used_minutes;
    const reservation = (n: number, month: string, kept: number) => sql`
      insert into minute_reservations (call_id, organization_id, plan_charged, month, reserved_minutes, max_seconds,
        kept_minutes, settled_at, created_at, plan_return_pending)
      values (${`call_PR${org.slice(-6)}${n}`.padEnd(31, "0")}, ${org}, true, ${month}, 10, 600, ${kept}, now(), now(), true)`;
    await sql`
      insert into minute_usage (kind, subject_id, month, used_minutes)
      values ('plan', ${org}, '2026-10-01', 30), ('plan', ${org}, '2026-11-01', 10)`;
    await reservation(1, "2026-10-01", 1);
    await reservation(2, "2026-10-01", 5);
    await reservation(3, "2026-11-01", 3);
    const pass = await housekeepingPass(sql, ctx.deps);
    expect(pass.pastPlanReturns).toBeGreaterThanOrEqual(1);
    expect(await row("2026-10-01")).toBe(30 - 9 - 5);
    // November's return is the current month's: it waits, and every read subtracts it.
    expect(await row("2026-11-01")).toBe(10);
    const pending = await sql<{ month: string }[]>`
      select to_char(month, 'YYYY-MM-DD') as month from minute_reservations
      where organization_id = ${org} and plan_return_pending`;
    expect([...pending]).toEqual([{ month: "2026-11-01" }]);
    expect(await usedMinutes(sql, clock, { organizationId: org })).toBe(3);
  });
});

/**
 * The rows changed in `table` since its last analysis, once the statistics views show at least `atLeast`
 * of them: sessions report their changes to the views up to a second or so later (db/statistics.ts).
 */
async function changesSinceAnalyze(table: string, atLeast: number): Promise<number> {
  let n = 0;
  await waitUntil(`${atLeast} changes of ${table} to reach the statistics views`, async () => {
    const [row] = await ctx.db.sql<{ n: number }[]>`
      select n_mod_since_analyze::int as n from pg_stat_user_tables where relname = ${table}`;
    n = row!.n;
    return n >= atLeast;
  });
  return n;
}

describe("the statistics timer", () => {
  test("analyzes a table that grew since its statistics, and only then; then checks again in STATISTICS_EVERY_MS", async () => {
    const sql = ctx.db.sql;
    const reltuples = async () =>
      (await sql<{ n: number }[]>`select reltuples::int as n from pg_class where oid = 'calls'::regclass`)[0]!
        .n;
    await sql`analyze calls`;
    expect(await tablesWithStaleStatistics(sql)).not.toContain("calls");
    await sql`
      insert into calls (id, organization_id, livemode, status, agent_id, direction, created_at, updated_at)
      select 'call_' || lpad(i::text, 26, '0'), ${seed.org.id}, false, 'completed', ${seed.agent.id}, 'web', now(), now()
      from generate_series(1, 5000) i`;
    // Growth is seen at once, from the table's pages.
    expect(await tablesWithStaleStatistics(sql)).toContain("calls");
    // The pass runs once the insert is counted too: counted after the analyze, it would make the table
    // stale again (and analyzed once more at the next check).
    await changesSinceAnalyze("calls", 5000);
    const before = await reltuples();
    await sql`update timers set due_at = now() where kind = 'statistics'`;
    const runner = testRunner(ctx.db);
    registerTimerHandlers(runner, { ...ctx.deps, timers: runner });
    await runner.start();
    try {
      await waitUntil("the statistics pass to run and schedule the next one", async () => {
        const [due] = await sql<{ due_at: Date }[]>`
          select due_at from timers where kind = 'statistics' and status = 'pending'`;
        return due && due.due_at.getTime() > Date.now() + STATISTICS_EVERY_MS / 2;
      });
    } finally {
      await runner.stop();
    }
    expect(await reltuples()).toBeGreaterThanOrEqual(before + 5000);
    expect(await tablesWithStaleStatistics(sql)).not.toContain("calls");
  });

  test("sees rows updated in place and rows deleted, which leave the table's pages as they were", async () => {
    const sql = ctx.db.sql;
    // On one session, which then reports its changes at once: every change so far is counted before
    // the analyze, none after it.
    const conn = await sql.reserve();
    try {
      await conn`delete from calls`;
      await conn`
        insert into calls (id, organization_id, livemode, status, agent_id, direction, created_at, updated_at)
        select 'call_' || lpad(i::text, 26, '0'), ${seed.org.id}, false, 'ringing', ${seed.agent.id}, 'web', now(), now()
        from generate_series(1, 5000) i`;
      await conn`select pg_stat_force_next_flush()`;
      await conn`select 1`;
    } finally {
      conn.release();
    }
    await sql`analyze calls`;
    expect(await tablesWithStaleStatistics(sql)).not.toContain("calls");
    const pages = async () =>
      (await sql<{ n: number }[]>`select relpages as n from pg_class where oid = 'calls'::regclass`)[0]!.n;
    const analyzedPages = await pages();

    // 700 of 5,000 rows (more than a tenth) change status: the table grows by less than a fifth.
    await sql`update calls set status = 'completed' where id <= ${`call_${"0".repeat(22)}0700`}`;
    expect(await changesSinceAnalyze("calls", 700)).toBeLessThan(1000);
    expect(await tablesWithStaleStatistics(sql)).toContain("calls");
    // Changes in place are for the full check, once a minute: the check every few seconds looks only
    // for tables that were small.
    expect(await tablesWithStaleStatistics(sql, { full: false })).not.toContain("calls");
    await sql`analyze calls`;
    expect(await pages()).toBeLessThan(analyzedPages * 1.2);

    // 700 rows go: the table keeps its pages.
    await sql`delete from calls where id > ${`call_${"0".repeat(22)}4300`}`;
    await changesSinceAnalyze("calls", 700);
    expect(await tablesWithStaleStatistics(sql)).toContain("calls");
  });

  test("a plan a connection kept while the table was small is made again once the check analyzed it", async () => {
    // What every pooled connection does with a prepared statement: its generic plan is made once and
    // kept. Made while the table held a page, it scans the table; kept, it would go on scanning as the
    // table grows, on every call, until something invalidates it. The analyze of the check does.
    const conn = await ctx.db.sql.reserve();
    const plan = async () => {
      const [row] = await conn.unsafe<{ "QUERY PLAN": [{ Plan: PlanNode }] }[]>(
        "explain (format json) execute probe('call_none')",
      );
      return readsOf(row!["QUERY PLAN"][0].Plan, "calls")[0]!;
    };
    const insert = (from: number, to: number) => conn`
      insert into calls (id, organization_id, livemode, status, agent_id, direction, created_at, updated_at)
      select 'call_' || lpad(i::text, 26, '0'), ${seed.org.id}, true, 'ringing', ${seed.agent.id}, 'outbound',
        now(), now()
      from generate_series(${from}::int, ${to}::int) i`;
    try {
      // A table of one page: the earlier tests' rows gone, their pages too.
      await conn`delete from calls`;
      await conn`vacuum calls`;
      await insert(1, 10);
      await conn`analyze calls`;
      await conn`set plan_cache_mode = force_generic_plan`;
      await conn.unsafe(
        "prepare probe(text) as update calls set status = 'ongoing' where id = $1 and status = 'ringing'",
      );
      await conn.unsafe("execute probe('call_none')");
      expect((await plan())["Node Type"]).toBe("Seq Scan");

      await insert(11, 10_000);
      // Kept: the table grew a thousandfold under it.
      expect((await plan())["Node Type"]).toBe("Seq Scan");

      // The check every few seconds finds it: analyzed at one page, it has thousands.
      const stale = await tablesWithStaleStatistics(conn, { full: false });
      expect(stale).toContain("calls");
      for (const table of stale) await analyzeTable(conn, table);
      const after = await plan();
      expect(after["Node Type"]).toBe("Index Scan");
      expect(after["Index Name"]).toBe("calls_pkey");
    } finally {
      // Only ours: the driver's own prepared statements live on this connection too.
      await conn.unsafe("deallocate probe").catch(() => {});
      await conn`reset plan_cache_mode`.catch(() => {});
      await conn`delete from calls`.catch(() => {});
      conn.release();
    }
  });
});

describe("a bulk change", () => {
  const statisticsDue = async () =>
    (
      await ctx.db.sql<{ due_at: Date }[]>`
        select due_at from timers where kind = 'statistics' and status = 'pending'`
    )[0]!.due_at.getTime();
  const upload = (paragraphs: number) =>
    ctx.request(`/api/v1/knowledge-bases/${seed.kb.id}/documents`, {
      method: "POST",
      key: seed.liveKey,
      json: {
        title: `${paragraphs} paragraphs`,
        // Each paragraph fills a chunk of its own.
        text: Array.from({ length: paragraphs }, (_, i) => `${i} ${"word ".repeat(190)}`).join("\n\n"),
      },
    });

  test(`of ${BULK_CHANGE_ROWS} rows or more brings the statistics check forward; a smaller one does not`, async () => {
    await ctx.db.sql`update timers set due_at = now() + interval '1 minute' where kind = 'statistics'`;
    const later = await statisticsDue();
    expect((await upload(BULK_CHANGE_ROWS - 1)).status).toBe(201);
    expect(await statisticsDue()).toBe(later);
    expect((await upload(BULK_CHANGE_ROWS)).status).toBe(201);
    expect(await statisticsDue()).toBeLessThanOrEqual(Date.now());
  });
});

describe("retention of events and webhook deliveries", () => {
  const ENDPOINT = "we_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
  const days = () => ctx.deps.env.EVENT_RETENTION_DAYS;
  const ago = (ms: number) => new Date(clock.now().getTime() - ms);

  /** A fresh set of events and deliveries: the endpoint receives every event, one delivery each. */
  async function reset() {
    const sql = ctx.db.sql;
    await sql`delete from webhook_deliveries`;
    await sql`delete from events`;
    await sql`
      insert into webhook_endpoints (id, organization_id, livemode, url, events, secret, created_at)
      values (${ENDPOINT}, ${seed.org.id}, true, 'https://hooks.example.com/h', null, 'whsec_x', now())
      on conflict (id) do nothing`;
  }

  /** `count` events `tag_00001`… created at `at`, each delivered to the endpoint then (`status`). */
  async function insertEvents(tag: string, count: number, at: Date, status = "delivered") {
    const sql = ctx.db.sql;
    await sql`
      insert into events (id, organization_id, type, livemode, data, created_at)
      select 'evt_' || ${tag} || '_' || lpad(n::text, 5, '0'), ${seed.org.id}, 'contact.created', true, '{}', ${at}::timestamptz
      from generate_series(1, ${count}) n`;
    await sql`delete from timers where kind = 'webhook.deliver'`;
    await sql`
      update webhook_deliveries set created_at = ${at}, status = ${status}
      where event_id like ${`evt_${tag}_%`}`;
  }

  const count = async (table: "events" | "webhook_deliveries", like: string) =>
    (
      await ctx.db.sql<{ n: number }[]>`
        select count(*)::int as n from ${ctx.db.sql(table)}
        where ${ctx.db.sql(table === "events" ? "id" : "event_id")} like ${like}`
    )[0]!.n;

  test(`older than EVENT_RETENTION_DAYS they go with their finished deliveries, a batch of events per pass; a pending delivery and a recent redelivery keep their event`, async () => {
    const sql = ctx.db.sql;
    expect(days()).toBe(30);
    await reset();
    const old = RETENTION_BATCH + 5;
    await insertEvents("old", old, ago((days() + 1) * DAY));
    await insertEvents("young", 3, ago((days() - 1) * DAY));
    // The oldest event was redelivered yesterday; the second one's delivery still waits for a retry.
    await sql`
      insert into webhook_deliveries (event_id, endpoint_id, status, created_at)
      values ('evt_old_00001', ${ENDPOINT}, 'delivered', ${ago(DAY)})`;
    await sql`update webhook_deliveries set status = 'pending' where event_id = 'evt_old_00002'`;

    // A batch of events per pass; a full batch says where the next pass goes on.
    const first = await housekeepingPass(sql, ctx.deps);
    expect(first).toMatchObject({ events: RETENTION_BATCH - 2, deliveries: RETENTION_BATCH - 1 });
    expect(first.retentionFrom).toBe(`evt_old_0${RETENTION_BATCH}`);
    const second = await housekeepingPass(sql, ctx.deps, first.retentionFrom);
    expect(second).toMatchObject({ events: 5, deliveries: 5, retentionFrom: null });
    // The next walk starts from the oldest again: the two kept events are still kept.
    const third = await housekeepingPass(sql, ctx.deps, second.retentionFrom);
    expect(third).toMatchObject({ events: 0, deliveries: 0, retentionFrom: null });
    expect(
      (await sql<{ id: string }[]>`select id from events where id like 'evt_old_%' order by id`).map(
        (r) => r.id,
      ),
    ).toEqual(["evt_old_00001", "evt_old_00002"]);
    // The redelivery of the first stays, its old delivery went; the pending delivery stays.
    const kept = await sql`
      select event_id, status from webhook_deliveries where event_id like 'evt_old_%' order by event_id`;
    expect([...kept]).toEqual([
      { event_id: "evt_old_00001", status: "delivered" },
      { event_id: "evt_old_00002", status: "pending" },
    ]);
    expect(await count("events", "evt_young_%")).toBe(3);
    expect(await count("webhook_deliveries", "evt_young_%")).toBe(3);
  });

  test("a pass reads a batch of events at most, however many old events are kept ahead of the rest", async () => {
    const sql = ctx.db.sql;
    await reset();
    // Five batches of old events whose deliveries still wait for a retry, then ten removable ones,
    // then recent ones.
    await insertEvents("a_kept", 5 * RETENTION_BATCH, ago((days() + 2) * DAY), "pending");
    await insertEvents("b_gone", 10, ago((days() + 1) * DAY));
    await insertEvents("c_recent", 10, ago(DAY));
    const passes: { events: number; read: number }[] = [];
    let from: string | null = null;
    do {
      const pass = await sql.begin(async (tx) => {
        // The plans of a table of a real size, where the events of a month outnumber a batch by far:
        // ordered reads through indexes (on a table this small, reading it whole costs less).
        await tx`set local enable_seqscan = off`;
        await tx`set local enable_bitmapscan = off`;
        // The rows of `events` this transaction read, by any scan.
        const read = async () =>
          (
            await tx<{ n: number }[]>`
              select (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as n
              from pg_stat_xact_user_tables where relname = 'events'`
          )[0]!.n;
        const before = await read();
        const removed = await housekeepingPass(tx, ctx.deps, from);
        return { ...removed, read: (await read()) - before };
      });
      passes.push({ events: pass.events, read: pass.read });
      from = pass.retentionFrom;
    } while (from && passes.length < 10);
    expect(passes.map((p) => p.events)).toEqual([0, 0, 0, 0, 0, 10]);
    // Each pass reads its batch by the primary key, then the old ones of it by their keys to lock them
    // and to remove them: three reads of a batch at most, however many old events came before.
    for (const p of passes) {
      expect(p.read, JSON.stringify(passes)).toBeLessThanOrEqual(3 * RETENTION_BATCH);
    }
    expect(await count("events", "evt_a_kept_%")).toBe(5 * RETENTION_BATCH);
    expect(await count("webhook_deliveries", "evt_a_kept_%")).toBe(5 * RETENTION_BATCH);
    expect(await count("events", "evt_b_gone_%")).toBe(0);
    expect(await count("events", "evt_c_recent_%")).toBe(10);
  });

  test("a redelivery of an event that retention removes meanwhile is a 404, never a 500", async () => {
    const sql = ctx.db.sql;
    await reset();
    const id = "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
    await sql`
      insert into events (id, organization_id, type, livemode, data, created_at)
      values (${id}, ${seed.org.id}, 'contact.created', true, '{}', ${ago((days() + 1) * DAY)})`;
    await sql`update webhook_deliveries set status = 'delivered', created_at = ${ago((days() + 1) * DAY)}`;
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let removed!: () => void;
    const removing = new Promise<void>((resolve) => {
      removed = resolve;
    });
    // Retention removes the event in a transaction that stays open until the redelivery waits on it.
    const pass = sql.begin(async (tx) => {
      expect(await housekeepingPass(tx, ctx.deps)).toMatchObject({ events: 1 });
      removed();
      await held;
    });
    await removing;
    const answer = ctx.request(`/api/v1/events/${id}/redeliver`, {
      method: "POST",
      key: seed.liveKey,
    });
    if (ctx.db.kind === "postgres") {
      // The redelivery has reached the event and waits for the removal to end.
      await waitUntil("the redelivery to wait for the removal", async () => {
        const [row] = await sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`;
        return row!.n > 0 ? true : undefined;
      });
    }
    // (On the embedded database, one session: the redelivery runs once the removal has committed.)
    release();
    await pass;
    await expectApiError(await answer, 404, "not_found");
    expect(await count("webhook_deliveries", "evt_%")).toBe(0);
  });
});
