import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Sql } from "postgres";
import { recordEvent } from "../../src/services/events.ts";
import { deliverWebhook, MAX_ATTEMPTS } from "../../src/services/webhookDelivery.ts";
import { WebhookSender } from "../../src/services/webhookSender.ts";
import { databaseScheduler } from "../../src/timers/scheduler.ts";
import type { FiredTimer, HandlerContext } from "../../src/timers/types.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { waitUntil } from "../helpers/wait.ts";
import { expectedSignature, startWebhookReceiver, type WebhookReceiver } from "../helpers/webhookReceiver.ts";

/**
 * Webhook delivery to a local receiver: Standard Webhooks signature, body, event-type
 * subscriptions, retry after a failure, timeout, giving up, and endpoints deleted meanwhile.
 */

let receiver: WebhookReceiver;
beforeAll(() => {
  receiver = startWebhookReceiver();
});
afterAll(() => receiver.stop());

async function createEndpoint(ctx: TestContext, key: string, url: string, events?: string[]) {
  const res = await ctx.request("/api/v1/webhook-endpoints", {
    method: "POST",
    key,
    json: events ? { url, events } : { url },
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; secret: string };
}

async function deliveryOf(ctx: TestContext, eventId: string, endpointId: string) {
  const [row] = await ctx.db.sql<
    { id: string; status: string; attempts: number; last_status: number | null; last_error: string | null }[]
  >`select id::text, status, attempts, last_status, last_error from webhook_deliveries
    where event_id = ${eventId} and endpoint_id = ${endpointId}`;
  return row;
}

/** A delivery's timers: due in how long from now, and how long after the transaction that wrote them. */
const webhookTimers = async (ctx: TestContext, deliveryId: string) => [
  ...(await ctx.db.sql<{ due_in_ms: number; delay_ms: number }[]>`
    select (extract(epoch from due_at - now()) * 1000)::int as due_in_ms,
      (extract(epoch from due_at - created_at) * 1000)::int as delay_ms from timers
    where kind = 'webhook.deliver' and payload->>'deliveryId' = ${deliveryId}`),
];

describe("with the timer runner", () => {
  let ctx: TestContext;
  let seed: Awaited<ReturnType<typeof seedOrganization>>;
  beforeAll(async () => {
    ctx = await createTestContext({ timers: true, env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
    seed = await seedOrganization(ctx);
  });
  afterAll(() => ctx.close());

  async function createContact(key: string) {
    const res = await ctx.request("/api/v1/contacts", {
      method: "POST",
      key,
      json: { phone: "+33612345678" },
    });
    expect(res.status).toBe(201);
    const events = await (await ctx.request("/api/v1/events?type=contact.created&limit=1", { key })).json();
    return events.data[0] as {
      id: string;
      type: string;
      livemode: boolean;
      createdAt: string;
      data: unknown;
    };
  }

  test("an event reaches its subscribed endpoint signed per Standard Webhooks, in both modes; others get nothing", async () => {
    const subscribed = await createEndpoint(ctx, seed.liveKey, receiver.url("/contacts"), [
      "contact.created",
    ]);
    const elsewhere = await createEndpoint(ctx, seed.liveKey, receiver.url("/calls"), ["call.started"]);
    for (const key of [seed.testKey, seed.liveKey]) {
      const event = await createContact(key);
      const got = await waitUntil("the delivery", () =>
        receiver.at("/contacts").find((r) => r.headers["webhook-id"] === event.id),
      );
      expect(JSON.parse(got.body)).toEqual(event);
      expect(event.livemode).toBe(key === seed.liveKey);
      const timestamp = got.headers["webhook-timestamp"]!;
      expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(10);
      expect(got.headers["webhook-signature"]).toBe(
        expectedSignature(subscribed.secret, event.id, timestamp, got.body),
      );
      expect(got.headers["content-type"]).toBe("application/json");
      const delivery = await waitUntil("the recorded outcome", async () => {
        const d = await deliveryOf(ctx, event.id, subscribed.id);
        return d?.status === "delivered" ? d : undefined;
      });
      expect(delivery).toMatchObject({ attempts: 1, last_status: 200, last_error: null });
      expect(await webhookTimers(ctx, delivery.id)).toEqual([]);
      expect(await deliveryOf(ctx, event.id, elsewhere.id)).toBeUndefined();
    }
    expect(receiver.at("/calls")).toEqual([]);
    expect(ctx.logs.join("\n")).not.toContain(subscribed.secret.slice("whsec_".length));
  });

  test("a failed attempt (500) is retried 5 s later, and the retry's success ends the delivery", async () => {
    receiver.script("/flaky", [500]);
    const endpoint = await createEndpoint(ctx, seed.liveKey, receiver.url("/flaky"), ["contact.created"]);
    const event = await createContact(seed.liveKey);
    const failed = await waitUntil("the failed first attempt", async () => {
      const d = await deliveryOf(ctx, event.id, endpoint.id);
      return d?.last_status === 500 ? d : undefined;
    });
    expect(failed).toMatchObject({ status: "pending", attempts: 1, last_error: "answered 500" });
    // Due 5 s after the failure was written (the row's own times, however late this looks at it).
    const [retry] = await webhookTimers(ctx, failed.id);
    expect(retry!.delay_ms).toBe(5_000);
    const delivered = await waitUntil("the retry", async () => {
      const d = await deliveryOf(ctx, event.id, endpoint.id);
      return d?.status === "delivered" ? d : undefined;
    });
    expect(delivered).toMatchObject({ attempts: 2, last_status: 200, last_error: null });
    expect(receiver.at("/flaky").length).toBe(2);
    expect(await webhookTimers(ctx, failed.id)).toEqual([]);
  });

  test("an endpoint deleted before the attempt: the delivery is dropped, nothing is sent", async () => {
    const endpoint = await createEndpoint(ctx, seed.liveKey, receiver.url("/deleted"));
    let eventId = "";
    await ctx.db.sql.begin(async (tx) => {
      eventId = await recordEvent(tx, ctx.deps, {
        organizationId: seed.org.id,
        agentId: null,
        type: "contact.created",
        livemode: true,
        data: { id: "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" },
      });
      await tx`delete from webhook_endpoints where id = ${endpoint.id}`;
    });
    await waitUntil("the drop", async () => {
      const d = await deliveryOf(ctx, eventId, endpoint.id);
      return d?.status === "dropped" ? d : undefined;
    });
    expect(receiver.at("/deleted")).toEqual([]);
  });
});

describe("one attempt at a time (no runner: the handler is called by the test)", () => {
  let ctx: TestContext;
  let seed: Awaited<ReturnType<typeof seedOrganization>>;
  beforeAll(async () => {
    ctx = await createTestContext({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
    seed = await seedOrganization(ctx);
  });
  afterAll(() => ctx.close());

  /** Writes an event for one new endpoint at `path`; returns the delivery the trigger created. */
  async function pendingDelivery(path: string) {
    const endpoint = await createEndpoint(ctx, seed.liveKey, receiver.url(path));
    const eventId = await recordEvent(ctx.db.sql, ctx.deps, {
      organizationId: seed.org.id,
      agentId: null,
      type: "contact.deleted",
      livemode: true,
      data: { id: "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", deleted: true },
    });
    const delivery = (await deliveryOf(ctx, eventId, endpoint.id))!;
    // The trigger wrote the first attempt's timer, due now; this test fires it by hand.
    expect((await webhookTimers(ctx, delivery.id)).length).toBe(1);
    await ctx.db
      .sql`delete from timers where kind = 'webhook.deliver' and payload->>'deliveryId' = ${delivery.id}`;
    return { eventId, endpoint, delivery };
  }

  class RolledBack extends Error {}

  /**
   * Runs the handler of the delivery's timer as the runner does, in a transaction (rolled back when
   * `rollback`), and returns the work it asked to run after the commit (none after a rollback).
   */
  async function count(deliveryId: string, sender: WebhookSender, opts: { rollback?: boolean } = {}) {
    const handler = deliverWebhook(ctx.deps, sender);
    const committed: (() => void)[] = [];
    await ctx.db.sql
      .begin(async (transaction) => {
        const tx = transaction as unknown as Sql;
        const context: HandlerContext = {
          tx,
          timer: {
            id: "0",
            kind: "webhook.deliver",
            payload: { deliveryId: Number(deliveryId) },
            dueAt: new Date(),
            attempts: 0,
          } as FiredTimer,
          schedule: (t) => databaseScheduler.schedule(tx, t),
          afterCommit: (fn) => committed.push(fn),
        };
        await handler(context);
        if (opts.rollback) throw new RolledBack();
      })
      .catch((err) => {
        if (!(err instanceof RolledBack)) throw err;
        committed.length = 0;
      });
    return committed;
  }

  /** A whole attempt: counted, handed over after the commit, sent and recorded. */
  async function attempt(deliveryId: string, sender: WebhookSender, opts: { rollback?: boolean } = {}) {
    for (const fn of await count(deliveryId, sender, opts)) fn();
    await sender.idle();
  }

  test("no answer within the timeout is a failure: recorded, retried 5 s later, the safety net replaced", async () => {
    const { eventId, endpoint, delivery } = await pendingDelivery("/hang");
    const sender = new WebhookSender(ctx.deps, { timeoutMs: 300 });
    const started = Date.now();
    await attempt(delivery.id, sender);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({
      status: "pending",
      attempts: 1,
      last_status: null,
      last_error: "no answer within 300 ms",
    });
    const timers = await webhookTimers(ctx, delivery.id);
    expect(timers.length).toBe(1);
    expect(timers[0]!.delay_ms).toBe(5_000);
  });

  test(`a redirect is a failure and is not followed; after attempt ${MAX_ATTEMPTS} the delivery is given up`, async () => {
    receiver.script("/moved", [302, 302]);
    const { eventId, endpoint, delivery } = await pendingDelivery("/moved");
    const sender = new WebhookSender(ctx.deps);
    await attempt(delivery.id, sender);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({
      status: "pending",
      attempts: 1,
      last_status: 302,
    });
    expect(receiver.at("/elsewhere")).toEqual([]);
    // Six more failures happened meanwhile; the eighth and last attempt fails too.
    await ctx.db.sql`update webhook_deliveries set attempts = ${MAX_ATTEMPTS - 1} where id = ${delivery.id}`;
    await ctx.db
      .sql`delete from timers where kind = 'webhook.deliver' and payload->>'deliveryId' = ${delivery.id}`;
    await attempt(delivery.id, sender);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({
      status: "failed",
      attempts: MAX_ATTEMPTS,
      last_status: 302,
    });
    expect(await webhookTimers(ctx, delivery.id)).toEqual([]);
    expect(receiver.at("/moved").length).toBe(2);
  });

  test("an attempt whose transaction rolls back sends nothing; the next one is attempt 1 again", async () => {
    const { eventId, endpoint, delivery } = await pendingDelivery("/rolled-back");
    const sender = new WebhookSender(ctx.deps);
    await attempt(delivery.id, sender, { rollback: true });
    expect(receiver.at("/rolled-back")).toEqual([]);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({ status: "pending", attempts: 0 });
    await attempt(delivery.id, sender);
    expect(receiver.at("/rolled-back").length).toBe(1);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({ status: "delivered", attempts: 1 });
    expect(await webhookTimers(ctx, delivery.id)).toEqual([]);
  });

  test("an attempt whose delivery moved on before its turn to be sent (it waited in the queue) is not sent", async () => {
    const { eventId, endpoint, delivery } = await pendingDelivery("/stale");
    const sender = new WebhookSender(ctx.deps);
    const committed = await count(delivery.id, sender);
    // Meanwhile its safety net fired and a later attempt counted itself.
    await ctx.db.sql`update webhook_deliveries set attempts = 2 where id = ${delivery.id}`;
    for (const fn of committed) fn();
    await sender.idle();
    expect(receiver.at("/stale")).toEqual([]);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({ status: "pending", attempts: 2 });
  });

  test("an endpoint disabled while its delivery waited to be sent: nothing sent, the delivery dropped at once", async () => {
    const { eventId, endpoint, delivery } = await pendingDelivery("/disabled-meanwhile");
    const sender = new WebhookSender(ctx.deps);
    const committed = await count(delivery.id, sender);
    const [held] = await webhookTimers(ctx, delivery.id);
    expect(held!.due_in_ms).toBeGreaterThan(60_000);
    await ctx.db.sql`update webhook_endpoints set enabled = false where id = ${endpoint.id}`;
    for (const fn of committed) fn();
    await sender.idle();
    expect(receiver.at("/disabled-meanwhile")).toEqual([]);
    // Its holding timer is due now, not when the hold runs out; firing it ends the delivery.
    const [due] = await webhookTimers(ctx, delivery.id);
    expect(due!.due_in_ms).toBeLessThanOrEqual(0);
    await attempt(delivery.id, sender);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({
      status: "dropped",
      attempts: 0,
      last_error: "endpoint disabled",
    });
  });

  test("a public-looking name that resolves to a private address is refused without a request", async () => {
    const { eventId, endpoint, delivery } = await pendingDelivery("/resolved");
    await ctx.db
      .sql`update webhook_endpoints set url = 'https://hooks.example.com/x' where id = ${endpoint.id}`;
    const resolved: string[] = [];
    const sender = new WebhookSender(
      { ...ctx.deps, env: { ...ctx.deps.env, WEBHOOK_ALLOW_PRIVATE_URLS: false } },
      {
        resolve: async (host) => {
          resolved.push(host);
          return ["93.184.216.34", "10.0.0.7"];
        },
      },
    );
    await attempt(delivery.id, sender);
    expect(resolved).toEqual(["hooks.example.com"]);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({
      status: "pending",
      attempts: 1,
      last_error: "url resolves to a loopback, private or reserved address",
    });
  });

  test("shutdown waits a bounded time: a quick request is recorded, a hanging one is left to its safety net", async () => {
    const quick = await pendingDelivery("/drain-quick");
    const hanging = await pendingDelivery("/hang");
    const sender = new WebhookSender(ctx.deps, { timeoutMs: 5_000 });
    for (const { delivery } of [quick, hanging]) {
      for (const fn of await count(delivery.id, sender)) fn();
    }
    const started = Date.now();
    expect(await sender.drain(500)).toBe(false);
    // It gave up after its own bound, not after the hanging request's 5 s timeout.
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(await deliveryOf(ctx, quick.eventId, quick.endpoint.id)).toMatchObject({ status: "delivered" });
    // The hanging attempt is counted and its safety net is in place.
    expect(await deliveryOf(ctx, hanging.eventId, hanging.endpoint.id)).toMatchObject({
      status: "pending",
      attempts: 1,
    });
    expect((await webhookTimers(ctx, hanging.delivery.id)).length).toBe(1);
    expect(await new WebhookSender(ctx.deps).drain(10)).toBe(true);
    await sender.idle();
  });

  test("a delivery waiting for a slot is not counted; at shutdown it is handed back, its timer due at once", async () => {
    const first = await pendingDelivery("/hang-slot-1");
    const second = await pendingDelivery("/hang-slot-2");
    const sender = new WebhookSender(ctx.deps, { timeoutMs: 5_000, concurrency: 1 });
    for (const { delivery } of [first, second]) {
      for (const fn of await count(delivery.id, sender)) fn();
    }
    await waitUntil("the first request", () => (receiver.at("/hang-slot-1").length === 1 ? true : undefined));
    // The second waits in memory behind the only slot: nothing counted, held by a distant timer.
    expect(await deliveryOf(ctx, second.eventId, second.endpoint.id)).toMatchObject({ attempts: 0 });
    const [held] = await webhookTimers(ctx, second.delivery.id);
    expect(held!.due_in_ms).toBeGreaterThan(60_000);
    expect(await sender.drain(100)).toBe(false);
    expect(receiver.at("/hang-slot-2")).toEqual([]);
    expect(await deliveryOf(ctx, second.eventId, second.endpoint.id)).toMatchObject({ attempts: 0 });
    const [handedBack] = await webhookTimers(ctx, second.delivery.id);
    expect(handedBack!.due_in_ms).toBeLessThanOrEqual(0);
    expect(await deliveryOf(ctx, first.eventId, first.endpoint.id)).toMatchObject({ attempts: 1 });
    await sender.idle();
  });

  test("an outcome written after a later attempt took over changes nothing (the attempt number fences it)", async () => {
    const { eventId, endpoint, delivery } = await pendingDelivery("/late");
    const sender = new WebhookSender(ctx.deps);
    await attempt(delivery.id, sender);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({ status: "delivered", attempts: 1 });
    // The safety net of a lost outcome firing after all: the delivery is finished, no request goes out.
    const before = receiver.at("/late").length;
    await attempt(delivery.id, sender);
    expect(receiver.at("/late").length).toBe(before);
    expect(await deliveryOf(ctx, eventId, endpoint.id)).toMatchObject({ status: "delivered", attempts: 1 });
  });
});

describe("a delivery leaves soon after its event, not at the runner's next poll", () => {
  // The deliveries' timers are written by the events' trigger, behind the runner's back: recording the
  // events asks the runner to look shortly. With a poll interval of a minute, only that look can send
  // them within the test's bound.
  let ctx: TestContext;
  let seed: Awaited<ReturnType<typeof seedOrganization>>;
  beforeAll(async () => {
    ctx = await createTestContext({
      timers: { pollIntervalMs: 60_000 },
      env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" },
    });
    seed = await seedOrganization(ctx);
  });
  afterAll(() => ctx.close());

  test("three events in a row, each delivered within two seconds of its 201", async () => {
    await createEndpoint(ctx, seed.testKey, receiver.url("/soon"), ["contact.created"]);
    for (const phone of ["+33612345671", "+33612345672", "+33612345673"]) {
      const res = await ctx.request("/api/v1/contacts", {
        method: "POST",
        key: seed.testKey,
        json: { phone },
      });
      expect(res.status).toBe(201);
      const answered = Date.now();
      const got = await waitUntil(
        "the delivery",
        () =>
          receiver
            .at("/soon")
            .find((r) => (JSON.parse(r.body) as { data: { phone: string } }).data.phone === phone),
        { timeoutMs: 2_000 },
      );
      expect(got.at - answered).toBeLessThan(2_000);
    }
  });
});
