import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type NewEvent, recordEvents } from "../../src/services/events.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { startWebhookReceiver, until, type WebhookReceiver } from "../helpers/webhookReceiver.ts";
import { SETUP_TIMEOUT_MS } from "../sessions/helpers.ts";

/**
 * Fair, bounded delivery: organization A's receiver hangs with thousands of deliveries pending, and
 * organization B's deliveries still arrive within a second. A's attempts are counted only as their
 * requests start, so waiting in line costs A none of its attempts.
 */

const BACKLOG = 3_000;

let ctx: TestContext;
let receiver: WebhookReceiver;
let a: Awaited<ReturnType<typeof seedOrganization>>;
let b: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  receiver = startWebhookReceiver();
  ctx = await createTestContext({ timers: true, env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
  a = await seedOrganization(ctx);
  b = await seedOrganization(ctx);
  for (const [seed, path] of [
    [a, "/hang-a"],
    [b, "/b"],
  ] as const) {
    const res = await ctx.request("/api/v1/webhook-endpoints", {
      method: "POST",
      key: seed.liveKey,
      json: { url: receiver.url(path), events: ["contact.created"] },
    });
    expect(res.status).toBe(201);
  }
}, SETUP_TIMEOUT_MS);
afterAll(async () => {
  await ctx.close();
  receiver.stop();
});

const contactCreated = (organizationId: string, i: number): NewEvent => ({
  organizationId,
  agentId: null,
  type: "contact.created",
  livemode: true,
  data: { id: `ct_${i}` },
});

/** A's deliveries: pending ones, and the attempts counted on them. */
async function backlogOfA() {
  const [row] = await ctx.deps.sql<{ pending: number; attempts: number }[]>`
    select count(*) filter (where d.status = 'pending')::int as pending, coalesce(sum(d.attempts), 0)::int as attempts
    from webhook_deliveries d join events e on e.id = d.event_id where e.organization_id = ${a.org.id}`;
  return row!;
}

describe("a dead receiver of one organization and another organization's deliveries", () => {
  test(`A has ${BACKLOG} deliveries pending to a receiver that never answers`, async () => {
    for (let i = 0; i < BACKLOG; i += 500) {
      await recordEvents(
        ctx.deps.sql,
        ctx.deps,
        Array.from({ length: 500 }, (_, j) => contactCreated(a.org.id, i + j)),
      );
    }
    // Every delivery has been looked at once: a few are in flight, some wait in A's queue, the rest
    // were deferred until the queue has room. No timer is overdue any more.
    await until(
      "the backlog to settle",
      async () => {
        const [row] = await ctx.deps.sql<{ due: number }[]>`
          select count(*)::int as due from timers where kind = 'webhook.deliver' and due_at <= now()`;
        return row!.due === 0 && receiver.at("/hang-a").length > 0 ? true : undefined;
      },
      60_000,
    );
    expect((await backlogOfA()).pending).toBe(BACKLOG);
  }, 90_000);

  test("B's deliveries each arrive within a second while A's requests hang", async () => {
    const lags: number[] = [];
    for (let i = 0; i < 20; i++) {
      const sent = Date.now();
      const [id] = await recordEvents(ctx.deps.sql, ctx.deps, [contactCreated(b.org.id, i)]);
      const got = await until("B's delivery", () =>
        receiver.at("/b").find((r) => r.headers["webhook-id"] === id),
      );
      lags.push(got.at - sent);
      await Bun.sleep(50);
    }
    expect(Math.max(...lags)).toBeLessThan(1_000);
    // Meanwhile A's receiver is still hanging on its first requests.
    expect((await backlogOfA()).pending).toBe(BACKLOG);
  }, 60_000);

  test("A's attempts are counted as their requests start, never while they wait; A holds only its own slots", async () => {
    const { attempts } = await backlogOfA();
    const requests = receiver.at("/hang-a").length;
    // Each counted attempt is a request the receiver got (a few may be between the two reads).
    expect(attempts).toBeGreaterThan(0);
    expect(Math.abs(attempts - requests)).toBeLessThanOrEqual(4);
    // A's requests so far: its 4 slots, refilled each time one times out (15 s): far fewer than its backlog.
    expect(requests).toBeLessThanOrEqual(4 * 3);
  });
});
