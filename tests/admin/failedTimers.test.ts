import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { runAdmin } from "../../src/cli/admin.ts";
import { ensureSingleTimer } from "../../src/db/timers.ts";
import { idTime, ROW_ID_KEY, rowId } from "../../src/ids.ts";
import { TIMER_KINDS } from "../../src/timers/kinds.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { waitUntil } from "../helpers/wait.ts";
import { ADMIN_TOKEN, admin } from "./support.ts";

/**
 * Work that gave up is visible: a timer whose handler kept failing until its retries ran out is listed
 * by the admin API and the CLI (kind, object, attempts, last error, times) and can be put back to work.
 */

const FLAKY = "test.flaky";
/** How the flaky work behaves: fail (with this message) until told to succeed. */
const flaky = { fail: true, done: [] as string[] };

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({
    env: { ADMIN_TOKEN },
    timers: { maxAttempts: 3, backoff: () => 20, pollIntervalMs: 30 },
  });
  ctx.runner!.register(FLAKY, async ({ timer }) => {
    if (flaky.fail) throw new Error(`the media server refused (${String(timer.payload.callId)})`);
    flaky.done.push(String(timer.payload.callId));
  });
});
afterAll(() => ctx.close());

const CALL_ID = "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

describe("a timer that exhausted its retries", () => {
  let failedId = "";

  test("is listed with its kind, object, attempts, last error and times", async () => {
    await ctx.deps.timers.schedule(ctx.deps.sql, { kind: FLAKY, payload: { callId: CALL_ID } });
    const page = await waitUntil("the timer to give up", async () => {
      const { body } = await admin(ctx, "GET", "/failed-timers");
      return body.data.length === 1 ? body : undefined;
    });
    expect(page.has_more).toBe(false);
    const [item] = page.data;
    expect(item).toEqual({
      id: expect.stringMatching(/^tmr_[0-9A-HJKMNP-TV-Z]{26}$/),
      kind: FLAKY,
      object: CALL_ID,
      payload: { callId: CALL_ID },
      status: "failed",
      attempts: 3,
      lastError: `the media server refused (${CALL_ID})`,
      createdAt: expect.stringMatching(/Z$/),
      failedAt: expect.stringMatching(/Z$/),
    });
    expect(Date.parse(item.failedAt)).toBeGreaterThanOrEqual(Date.parse(item.createdAt));
    failedId = item.id;
    // The CLI lists the same.
    const cli = await runAdmin(["list-failed-timers"], ctx.deps);
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual(page);
  });

  test("a webhook delivery's timer names the delivery as its endpoint's log does", async () => {
    const { org } = await seedOrganization(ctx);
    const event = ctx.deps.ids.next("evt");
    await ctx.deps.sql`
      insert into events (id, organization_id, type, livemode, data, created_at)
      values (${event}, ${org.id}, 'contact.created', true, '{}', now())`;
    const [delivery] = await ctx.deps.sql<{ id: string; created_at: Date }[]>`
      insert into webhook_deliveries (event_id, endpoint_id) values (${event}, ${ctx.deps.ids.next("we")})
      returning id::text as id, created_at`;
    const failed = (payload: object) => ctx.deps.sql<{ id: string; created_at: Date }[]>`
      insert into timers (kind, due_at, payload, status, attempts, last_error, failed_at)
      values (${TIMER_KINDS.webhookDelivery}, now(), ${ctx.deps.sql.json(payload as never)}, 'failed', 20, 'boom', now())
      returning id::text as id, created_at`;
    // One whose delivery exists, then one whose delivery was removed (by retention): no object then.
    const [row] = await failed({ deliveryId: Number(delivery!.id) });
    const [gone] = await failed({ deliveryId: Number(delivery!.id) + 1_000_000 });
    const key = await ctx.deps.secrets.get(ROW_ID_KEY);
    const { body } = await admin(ctx, "GET", "/failed-timers?limit=2");
    expect(body.data).toMatchObject([
      { id: rowId(key, "tmr", gone!.id, gone!.created_at), object: null },
      {
        id: rowId(key, "tmr", row!.id, row!.created_at),
        object: rowId(key, "whd", delivery!.id, delivery!.created_at),
      },
    ]);
    // Ids are ULIDs of the row's creation time, like every other id.
    expect(idTime(body.data[1].id)).toBe(row!.created_at.getTime());
    expect(idTime(body.data[1].object)).toBe(delivery!.created_at.getTime());
    expect(body.has_more).toBe(true);
    const next = await admin(ctx, "GET", `/failed-timers?limit=2&starting_after=${body.data[1].id}`);
    expect(next.body).toMatchObject({ data: [{ id: failedId }], has_more: false });
    await ctx.deps.sql`delete from timers where id in (${row!.id}::bigint, ${gone!.id}::bigint)`;
  });

  test("retry puts it back to work: pending, due now, attempts from zero; the work then runs", async () => {
    flaky.fail = false;
    const { status, body } = await admin(ctx, "POST", `/failed-timers/${failedId}/retry`);
    expect(status).toBe(200);
    expect(body).toMatchObject({ id: failedId, status: "pending", attempts: 0, failedAt: null });
    await waitUntil("the retried work", async () => (flaky.done.includes(CALL_ID) ? true : undefined));
    expect((await admin(ctx, "GET", "/failed-timers")).body.data).toEqual([]);
  });

  test("refusals: unknown, malformed or no longer failed is 404; a periodic kind already pending is 400", async () => {
    const key = await ctx.deps.secrets.get(ROW_ID_KEY);
    const unknown = rowId(key, "tmr", 999_999, new Date());
    // The failed timer's id with another time: the time is part of the key, so no such timer.
    const altered = `${failedId.slice(0, 13)}${failedId[13] === "0" ? "1" : "0"}${failedId.slice(14)}`;
    for (const id of [failedId, "tmr_x", unknown, altered, "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"]) {
      const { status, body } = await admin(ctx, "POST", `/failed-timers/${id}/retry`);
      expect(`${id} ${status} ${body.error.code}`).toBe(`${id} 404 not_found`);
    }
    const cli = await runAdmin(["retry-failed-timer", failedId], ctx.deps);
    expect(cli.code).toBe(1);
    expect(JSON.parse(cli.stderr).error.code).toBe("not_found");

    await ensureSingleTimer(ctx.deps.sql, TIMER_KINDS.housekeeping, 3_600_000);
    const [row] = await ctx.deps.sql<{ id: string }[]>`
      insert into timers (kind, due_at, payload, status, attempts, last_error, failed_at)
      values (${TIMER_KINDS.housekeeping}, now(), '{}', 'failed', 20, 'boom', now())
      returning id::text as id`;
    const [made] = await ctx.deps.sql<
      { created_at: Date }[]
    >`select created_at from timers where id = ${row!.id}::bigint`;
    const id = rowId(await ctx.deps.secrets.get(ROW_ID_KEY), "tmr", row!.id, made!.created_at);
    const { status, body } = await admin(ctx, "POST", `/failed-timers/${id}/retry`);
    expect(status).toBe(400);
    expect(body.error.code).toBe("invalid_request");
    const [still] = await ctx.deps.sql`select status from timers where id = ${row!.id}::bigint`;
    expect(still!.status).toBe("failed");
  });
});
