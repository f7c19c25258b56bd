import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createLogger, type Logger } from "../../src/log.ts";
import { type NewEvent, recordEvents } from "../../src/services/events.ts";
import { WebhookSender } from "../../src/services/webhookSender.ts";
import { registerTimerHandlers } from "../../src/timerHandlers.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { waitUntil } from "../helpers/wait.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../helpers/webhookReceiver.ts";
import { testRunner } from "../timers/support.ts";

/**
 * Fair, bounded delivery: organization A's receiver hangs with thousands of deliveries pending, and
 * organization B's deliveries still arrive as fast as those of an organization that shares nothing
 * with A; ten organizations whose receivers hang never hold the slot a healthy one needs. A's attempts
 * are counted only as their requests start, so waiting in line costs A none of its attempts.
 */

const BACKLOG = 3_000;

type Seed = Awaited<ReturnType<typeof seedOrganization>>;

let ctx: TestContext;
/** A database of its own with one organization like B, its runner and sender in this same process. */
let control: TestContext;
let receiver: WebhookReceiver;
let a: Seed;
let b: Seed;
let c: Seed;

async function subscribe(context: TestContext, seed: Seed, url: string) {
  const res = await context.request("/api/v1/webhook-endpoints", {
    method: "POST",
    key: seed.liveKey,
    json: { url, events: ["contact.created"] },
  });
  expect(res.status).toBe(201);
}

beforeAll(async () => {
  receiver = startWebhookReceiver();
  ctx = await createTestContext({ timers: true, env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
  control = await createTestContext({ timers: true, env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
  a = await seedOrganization(ctx);
  b = await seedOrganization(ctx);
  c = await seedOrganization(control);
  await subscribe(ctx, a, receiver.url("/hang-a"));
  await subscribe(ctx, b, receiver.url("/b"));
  await subscribe(control, c, receiver.url("/c"));
});
afterAll(async () => {
  await ctx.close();
  await control.close();
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
    // wait in the table for room in it. No timer is overdue any more.
    await waitUntil(
      "the backlog to settle",
      async () => {
        const [row] = await ctx.deps.sql<{ due: number }[]>`
          select count(*)::int as due from timers where kind = 'webhook.deliver' and due_at <= now()`;
        return row!.due === 0 && receiver.at("/hang-a").length > 0 ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect((await backlogOfA()).pending).toBe(BACKLOG);
    // Longer than the suite's timeout: recording the backlog, then up to 60 s for it to settle.
  }, 90_000);

  test("B's deliveries arrive as fast as those of an organization without A beside it, while A's requests hang", async () => {
    // Each of B's deliveries is measured in turn with one of C's, an organization on a database of
    // its own (no backlog there) served by a runner and sender in this same process: both see the same
    // machine at the same moments, so what a loaded machine adds to B it adds to C too, and the
    // difference is what A's backlog costs B. Were B waiting behind A's hanging requests, that would be
    // their time bound (15 s); behind the work of moving A's deliveries, seconds.
    const lag = async (context: TestContext, seed: Seed, path: string, i: number) => {
      const sent = Date.now();
      const [id] = await recordEvents(context.deps.sql, context.deps, [contactCreated(seed.org.id, i)]);
      const got = await waitUntil(`the delivery to ${path}`, () =>
        receiver.at(path).find((r) => r.headers["webhook-id"] === id),
      );
      return got.at - sent;
    };
    const lagsOfB: number[] = [];
    const lagsOfC: number[] = [];
    for (let i = 0; i < 20; i++) {
      // In alternating order, so neither always goes first.
      if (i % 2 === 0) {
        lagsOfB.push(await lag(ctx, b, "/b", i));
        lagsOfC.push(await lag(control, c, "/c", i));
      } else {
        lagsOfC.push(await lag(control, c, "/c", i));
        lagsOfB.push(await lag(ctx, b, "/b", i));
      }
      await Bun.sleep(50);
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
    const lags = { b: lagsOfB, c: lagsOfC };
    expect(median(lagsOfB), JSON.stringify(lags)).toBeLessThan(median(lagsOfC) + 250);
    expect(Math.max(...lagsOfB), JSON.stringify(lags)).toBeLessThan(Math.max(...lagsOfC) + 1_000);
    // Meanwhile A's receiver is still hanging on its first requests.
    expect((await backlogOfA()).pending).toBe(BACKLOG);
  });

  test("A's attempts are counted as their requests start, never while they wait; A holds only its own slots", async () => {
    const { attempts } = await backlogOfA();
    const hanging = receiver.at("/hang-a");
    const requests = hanging.length;
    // Each counted attempt is a request the receiver got (a few may be between the two reads).
    expect(attempts).toBeGreaterThan(0);
    expect(Math.abs(attempts - requests)).toBeLessThanOrEqual(4);
    // A's requests so far: its 4 slots, refilled each time one times out (15 s): far fewer than its backlog.
    const rounds = 1 + Math.ceil((Date.now() - hanging[0]!.at) / 15_000);
    expect(requests).toBeLessThanOrEqual(4 * rounds);
    expect(requests).toBeLessThan(BACKLOG / 10);
  });
});

describe("ten organizations whose receivers hang, and a healthy one", () => {
  /**
   * Ten organizations with more deliveries than slots, to receivers that take every request and never
   * answer (their time bound made longer than the test, so no slot frees meanwhile), then one whose
   * receiver answers: its deliveries arrive while all the hanging requests still hang.
   */
  async function tenHangingAndOneHealthy(options: ConstructorParameters<typeof WebhookSender>[1]) {
    const own = await createTestContext({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
    const hanging = startWebhookReceiver();
    const runner = testRunner(own.db);
    const sender = new WebhookSender({ ...own.deps, timers: runner }, { timeoutMs: 600_000, ...options });
    // At the end of the test the hanging requests end with their receiver.
    cleanups.push(async () => {
      hanging.stop();
      await sender.idle();
      await runner.stop();
      await own.close();
    });
    registerTimerHandlers(runner, { ...own.deps, timers: runner }, sender);
    await runner.start();
    const dead: Seed[] = [];
    for (let i = 0; i < 10; i++) {
      const seed = await seedOrganization(own);
      await subscribe(own, seed, hanging.url(`/hang-${i}`));
      dead.push(seed);
    }
    const healthy = await seedOrganization(own);
    await subscribe(own, healthy, hanging.url("/healthy"));
    await recordEvents(
      own.deps.sql,
      own.deps,
      dead.flatMap((seed, i) => Array.from({ length: 8 }, (_, j) => contactCreated(seed.org.id, i * 8 + j))),
    );
    const hangingRequests = () => hanging.received.filter((r) => r.path.startsWith("/hang")).length;
    return {
      own,
      hangingRequests,
      /** Waits until the hanging receivers hold `n` requests, then sends the healthy organization's. */
      async healthyAfter(n: number) {
        await waitUntil(`${n} hanging requests`, () => (hangingRequests() >= n ? true : undefined), {
          timeoutMs: 30_000,
        });
        const ids = await recordEvents(
          own.deps.sql,
          own.deps,
          Array.from({ length: 5 }, (_, i) => contactCreated(healthy.org.id, 1_000 + i)),
        );
        await waitUntil("the healthy organization's deliveries", () =>
          ids.every((id) => hanging.at("/healthy").some((r) => r.headers["webhook-id"] === id))
            ? true
            : undefined,
        );
      },
    };
  }
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const fn of cleanups.splice(0)) await fn();
  });

  test("with the default slots, each hanging organization holds its four and the healthy one is served", async () => {
    const run = await tenHangingAndOneHealthy({});
    await run.healthyAfter(40);
    // All forty are still hanging, none ended: the healthy organization needed none of their slots.
    expect(run.hangingRequests()).toBe(40);
    const [row] = await run.own.deps.sql<{ n: number }[]>`
      select count(*)::int as n from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id
      where e.url like '%/hang-%' and d.attempts > 0 and d.status = 'pending'`;
    expect(row!.n).toBe(40);
  });

  test("past the shared pool, hanging organizations hold one slot each beside it, and the healthy one is served", async () => {
    const run = await tenHangingAndOneHealthy({ shared: 4, concurrency: 16 });
    // Ten first requests, four from the shared pool; no more than that ever starts.
    await run.healthyAfter(14);
    expect(run.hangingRequests()).toBe(14);
  });
});

/**
 * A database of its own with one organization subscribed to `path`, and a sender whose queue holds 8
 * deliveries, so that a backlog has to wait in the table; `log`, if given, receives the handlers' log lines.
 */
async function withSmallQueue(
  path: string,
  fn: (own: TestContext, seed: Seed) => Promise<void>,
  log?: Logger,
): Promise<void> {
  const own = await createTestContext({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
  const runner = testRunner(own.db);
  try {
    const seed = await seedOrganization(own);
    const res = await own.request("/api/v1/webhook-endpoints", {
      method: "POST",
      key: seed.liveKey,
      json: { url: receiver.url(path), events: ["contact.created"] },
    });
    expect(res.status).toBe(201);
    const deps = { ...own.deps, timers: runner, log: log ?? own.deps.log };
    const sender = new WebhookSender(deps, { queuePerOrganization: 8 });
    registerTimerHandlers(runner, deps, sender);
    await runner.start();
    await fn(own, seed);
  } finally {
    await runner.stop();
    await own.close();
  }
}

async function allDelivered(own: TestContext, total: number): Promise<void> {
  await waitUntil(
    "every delivery recorded",
    async () => {
      const [row] = await own.deps.sql<{ n: number }[]>`
        select count(*)::int as n from webhook_deliveries where status = 'delivered'`;
      return row!.n === total ? true : undefined;
    },
    { timeoutMs: 30_000 },
  );
}

describe("a backlog larger than an organization's queue", () => {
  test("reaches a fast receiver as the queue empties, not when the waiting deliveries' timers come due", async () => {
    // A queue of 8: most of the 200 deliveries have to wait for room, 10 minutes at most.
    await withSmallQueue("/small-queue", async (own, seed) => {
      await recordEvents(
        own.deps.sql,
        own.deps,
        Array.from({ length: 200 }, (_, i) => contactCreated(seed.org.id, i)),
      );
      await allDelivered(own, 200);
      const ids = new Set(receiver.at("/small-queue").map((r) => r.headers["webhook-id"]));
      expect(ids.size).toBe(200);
    });
  });
});

describe("deliveries brought forward from the table", () => {
  test("keep their places against the deliveries of newer events, and wait once", async () => {
    const logs: string[] = [];
    const log = createLogger("debug", (line) => logs.push(line));
    await withSmallQueue(
      "/brought-forward",
      async (own, seed) => {
        // A backlog, then new events all the while it is being delivered: their deliveries are due as
        // soon as they are written, before the timers of those the sender brings forward fire.
        await recordEvents(
          own.deps.sql,
          own.deps,
          Array.from({ length: 120 }, (_, i) => contactCreated(seed.org.id, i)),
        );
        for (let burst = 0; burst < 20; burst++) {
          await recordEvents(
            own.deps.sql,
            own.deps,
            Array.from({ length: 6 }, (_, i) => contactCreated(seed.org.id, 1_000 + burst * 6 + i)),
          );
          await Bun.sleep(25);
        }
        const total = 120 + 20 * 6;
        await allDelivered(own, total);
        expect(new Set(receiver.at("/brought-forward").map((r) => r.headers["webhook-id"])).size).toBe(total);
        // How often each delivery was sent back to wait in the table.
        const waits = new Map<number, number>();
        for (const line of logs) {
          const entry = JSON.parse(line) as { msg?: string; deliveryId?: number };
          if (!entry.msg?.startsWith("webhook delivery waits")) continue;
          waits.set(entry.deliveryId!, (waits.get(entry.deliveryId!) ?? 0) + 1);
        }
        expect(waits.size).toBeGreaterThan(total / 2);
        const twice = [...waits.values()].filter((n) => n > 1).length;
        // A brought delivery whose timer fires before its place is promised (another connection's claim
        // answered first) may wait once more; none goes round again and again.
        expect(Math.max(...waits.values())).toBeLessThanOrEqual(2);
        expect(twice).toBeLessThanOrEqual(total / 20);
      },
      log,
    );
  });
});

describe("an organization's queue is bounded", () => {
  test("places promised to handlers not yet committed count; other organizations have their own", () => {
    const sender = new WebhookSender(ctx.deps, { queuePerOrganization: 2 });
    expect(sender.accepts("org_a", 1)).toBe(true);
    expect(sender.accepts("org_a", 2)).toBe(true);
    // The same delivery asking again keeps its place; a third one finds none.
    expect(sender.accepts("org_a", 1)).toBe(true);
    expect(sender.accepts("org_a", 3)).toBe(false);
    expect(sender.accepts("org_b", 4)).toBe(true);
  });
});
