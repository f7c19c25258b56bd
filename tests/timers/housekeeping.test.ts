import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sha256 } from "../../src/auth/keys.ts";
import { ManualClock } from "../../src/clock.ts";
import { rememberCaptchaToken } from "../../src/db/captchaTokens.ts";
import { rateLimitHitsSql } from "../../src/db/rateLimits.ts";
import { insertSessionToken } from "../../src/db/sessionTokens.ts";
import { tablesWithStaleStatistics } from "../../src/db/statistics.ts";
import {
  BULK_CHANGE_ROWS,
  HOUSEKEEPING_EVERY_MS,
  housekeepingPass,
  RETENTION_BATCH,
  STATISTICS_EVERY_MS,
  scheduleHousekeeping,
} from "../../src/services/housekeeping.ts";
import { WEB_CALL_RATE_LIMIT } from "../../src/services/rateLimit.ts";
import { registerTimerHandlers } from "../../src/timerHandlers.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
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
    // A bot-check token accepted long ago (gone), one just now (kept).
    await rememberCaptchaToken(sql, sha256("captcha-old"), new Date(now - 3600_000), new Date(0));
    await rememberCaptchaToken(sql, sha256("captcha-new"), new Date(now - 1000), new Date(0));

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
    const captcha = await sql<{ token_hash: Uint8Array }[]>`select token_hash from captcha_tokens_used`;
    expect(captcha.map((t) => Buffer.from(t.token_hash).toString("hex"))).toEqual([
      Buffer.from(sha256("captcha-new")).toString("hex"),
    ]);
  });
});

describe("the statistics timer", () => {
  test("analyzes a table that grew since its statistics, and only then; then checks again in a minute", async () => {
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
    expect(await tablesWithStaleStatistics(sql)).toContain("calls");
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
  test(`older than EVENT_RETENTION_DAYS they go, in bounded batches; a recent redelivery keeps its event`, async () => {
    const sql = ctx.db.sql;
    const now = clock.now().getTime();
    const days = ctx.deps.env.EVENT_RETENTION_DAYS;
    expect(days).toBe(30);
    const endpointId = "we_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
    await sql`
      insert into webhook_endpoints (id, organization_id, livemode, url, events, secret, created_at)
      values (${endpointId}, ${seed.org.id}, true, 'https://hooks.example.com/h', null, 'whsec_x', now())`;
    // Old events with their old deliveries, more than one batch of them; a few young ones.
    const old = RETENTION_BATCH + 5;
    await sql`
      insert into events (id, organization_id, type, livemode, data, created_at)
      select 'evt_old_' || n, ${seed.org.id}, 'contact.created', true, '{}', ${new Date(now - (days + 1) * DAY)}::timestamptz
      from generate_series(1, ${old}) n`;
    await sql`
      insert into events (id, organization_id, type, livemode, data, created_at)
      select 'evt_young_' || n, ${seed.org.id}, 'contact.created', true, '{}', ${new Date(now - (days - 1) * DAY)}::timestamptz
      from generate_series(1, 3) n`;
    await sql`delete from timers where kind = 'webhook.deliver'`;
    await sql`update webhook_deliveries set created_at = ${new Date(now - (days + 1) * DAY)} where event_id like 'evt_old_%'`;
    // One old event was redelivered yesterday: its new delivery keeps it.
    await sql`
      insert into webhook_deliveries (event_id, endpoint_id, created_at)
      values ('evt_old_1', ${endpointId}, ${new Date(now - DAY)})`;
    const count = async (table: string, like: string) =>
      (
        await sql<{ n: number }[]>`
        select count(*)::int as n from ${sql(table)} where ${sql(table === "events" ? "id" : "event_id")} like ${like}`
      )[0]!.n;
    expect(await count("webhook_deliveries", "evt_old_%")).toBe(old + 1);

    // A batch at most per pass; a full batch brings the next pass sooner.
    const first = await housekeepingPass(sql, ctx.deps);
    expect(first).toMatchObject({ deliveries: RETENTION_BATCH, more: true });
    expect(first.events).toBeLessThanOrEqual(RETENTION_BATCH);
    const second = await housekeepingPass(sql, ctx.deps);
    expect(second).toMatchObject({ deliveries: 5, more: false });
    expect(await count("events", "evt_old_%")).toBe(1);
    expect(await count("webhook_deliveries", "evt_old_%")).toBe(1);
    expect(await count("events", "evt_young_%")).toBe(3);
    expect(await count("webhook_deliveries", "evt_young_%")).toBe(3);
  }, 60_000);
});
