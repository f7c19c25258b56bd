import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type postgres from "postgres";
import { composeDeps } from "../../src/compose.ts";
import { Coalescer, STATEMENT_COALESCING } from "../../src/db/engine/coalesce.ts";
import { refusedByDatabase } from "../../src/db/engine/connection.ts";
import type { Deps, LivePlacement } from "../../src/deps.ts";
import { ApiError } from "../../src/errors.ts";
import { silentLogger } from "../../src/log.ts";
import { updateAgent } from "../../src/services/agents.ts";
import { placeLiveCalls } from "../../src/services/calls.ts";
import { createContact } from "../../src/services/contacts.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { seedOrganization } from "../helpers/app.ts";
import { outcomeOf } from "../helpers/errors.ts";
import {
  freshNumber,
  type PhoneWorld,
  placeCall,
  placementWrites,
  type SharedPostgres,
  seedPhoneOrganization,
  startPhoneWorld,
  startSharedPostgres,
  tally,
} from "./support.ts";

/**
 * Live calls that `POST /v1/calls` places now go out in batches, one transaction each
 * (services/calls.ts, `placeLiveCalls`): each request of a batch gets the answer it would have had
 * alone, on its organization's limits and minutes as the requests before it in the batch left them.
 */

let w: PhoneWorld;
/** The organizations of every batch the app placed (a request alone is a batch of one). */
let batches: string[][] = [];
const sizes = () => batches.map((b) => b.length);

/** The app's own batching (compose.ts), with each batch noted. */
function trackedPlacements(deps: Deps): Deps["batches"]["livePlacements"] {
  const organizationOf = (r: LivePlacement) => r.auth.organizationId;
  return new Coalescer(
    async (request) => {
      batches.push([organizationOf(request)]);
      return (await placeLiveCalls(deps, [request]))[0]!;
    },
    (requests, more) => {
      const batch = requests.map(organizationOf);
      batches.push(batch);
      return placeLiveCalls(deps, requests, () => {
        const joined = more();
        batch.push(...joined.map(organizationOf));
        return joined;
      });
    },
    { maxBatch: STATEMENT_COALESCING.maxBatch, maxInFlight: 1, refusedByDatabase, joinWhileWaiting: true },
  );
}

/** A request of a batch as `POST /v1/calls` makes it, with the organization's live key (all scopes). */
function livePlacement(
  seed: { org: { id: string }; live: { id: string }; agent: { id: string } },
  to = freshNumber(),
): LivePlacement {
  return {
    auth: {
      keyId: seed.live.id,
      organizationId: seed.org.id,
      mode: "live",
      livemode: true,
      scopes: ["*"],
      agentIds: null,
      paidPlan: true,
    },
    agentId: seed.agent.id,
    to,
    contactId: null,
    variables: {},
  };
}

beforeAll(async () => {
  w = await startPhoneWorld();
  w.ctx.deps.batches.livePlacements = trackedPlacements(w.ctx.deps);
});
afterAll(() => w.close());

describe("live calls placed together", () => {
  test("20 parallel requests of one organization, every refusal mixed in: batched, each answered as alone", async () => {
    const seed = await seedPhoneOrganization(w.ctx, {
      maxConcurrentCalls: 4,
      maxCallsPerHour: 1000,
      allowedCountries: ["FR"],
    });
    const other = await w.ctx.deps.sql<{ id: string }[]>`
      insert into agents (id, organization_id, name, active, created_at)
      values (${w.ctx.deps.ids.next("agt")}, ${seed.org.id}, 'Other', true, now()) returning id`;
    const restricted = await createSecretKey(w.ctx.deps, seed.org.id, {
      mode: "live",
      scopes: ["*"],
      agentIds: [other[0]!.id],
    });
    const blocked = freshNumber();
    await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: blocked },
    });
    const before = await placementWrites(w.ctx);
    batches = [];

    const kinds = ["valid", "unknown agent", "restricted", "blocked", "foreign"] as const;
    const requests = Array.from({ length: 20 }, (_, i) => {
      const kind = i % 2 === 0 ? "valid" : kinds[1 + ((i >> 1) % 4)]!;
      const body = {
        agentId: kind === "unknown agent" ? "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" : seed.agent.id,
        to: kind === "blocked" ? blocked : kind === "foreign" ? "+12025550123" : freshNumber(),
      };
      return { kind, res: placeCall(w.ctx, kind === "restricted" ? restricted.key : seed.liveKey, body) };
    });
    const outcomes = await Promise.all(
      requests.map(async ({ kind, res }) => `${kind}: ${await outcomeOf(await res)}`),
    );
    expect(tally(outcomes)).toEqual({
      "valid: 201 ok": 4,
      "valid: 429 concurrency_limit_reached": 6,
      "unknown agent: 404 not_found": 3,
      "restricted: 403 agent_not_allowed": 3,
      "blocked: 403 number_blocked": 2,
      "foreign: 403 country_not_allowed": 2,
    });
    // More than one request went out in one transaction.
    expect(Math.max(...sizes())).toBeGreaterThan(1);
    expect(sizes().reduce((a, b) => a + b, 0)).toBe(20);
    // Only the four calls placed wrote anything: their call, dial timer, reservation, hour.
    const after = await placementWrites(w.ctx);
    const grew = (what: string) => after[what]! - before[what]!;
    expect(grew("calls")).toBe(4);
    expect(grew("timers")).toBe(4);
    expect(grew("reservations")).toBe(4);
    expect(grew("hour_counts")).toBe(4);
    expect(grew("minutes")).toBe(4 * 60);
  });

  test("the plan's minutes across a batch: 90 left reserve 60 then 30, the rest 403 plan_minutes_exhausted", async () => {
    const seed = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 90 });
    batches = [];
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() }),
      ),
    );
    expect(tally(await Promise.all(answers.map(outcomeOf)))).toEqual({
      "201 ok": 2,
      "403 plan_minutes_exhausted": 6,
    });
    expect(Math.max(...sizes())).toBeGreaterThan(1);
    const reserved = await w.ctx.deps.sql<{ reserved_minutes: number; max_seconds: number }[]>`
      select reserved_minutes, max_seconds from minute_reservations
      where organization_id = ${seed.org.id} order by reserved_minutes desc`;
    expect([...reserved]).toEqual([
      { reserved_minutes: 60, max_seconds: 3600 },
      { reserved_minutes: 30, max_seconds: 1800 },
    ]);
    const [usage] = await w.ctx.deps.sql<{ used_minutes: number }[]>`
      select used_minutes from minute_usage where kind = 'plan' and subject_id = ${seed.org.id}`;
    expect(usage!.used_minutes).toBe(90);
  });

  test("the largest plan an operator can set (2,147,483,647 minutes): each call reserves an hour, nothing overflows", async () => {
    const largest = 2_147_483_647;
    const seed = await seedPhoneOrganization(w.ctx, {}, { planMinutes: largest });
    const answers = await Promise.all(
      Array.from({ length: 3 }, () =>
        placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() }),
      ),
    );
    expect(tally(await Promise.all(answers.map(outcomeOf)))).toEqual({ "201 ok": 3 });
    const reserved = await w.ctx.deps.sql<{ reserved_minutes: number; max_seconds: number }[]>`
      select reserved_minutes, max_seconds from minute_reservations where organization_id = ${seed.org.id}`;
    expect([...reserved]).toEqual(Array(3).fill({ reserved_minutes: 60, max_seconds: 3600 }));
  });

  test("minutes that run out in a batch refuse before the concurrency limit: 403 plan_minutes_exhausted, never 429", async () => {
    // The order of the checks puts the plan's minutes before the organization's limits: a request that
    // finds both exhausted is refused for its minutes, in a batch as alone. One batch of four, as the
    // batching makes it (which requests share a batch depends on their arrival).
    const seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 2 }, { planMinutes: 90 });
    const request = (to: string) => livePlacement(seed, to);
    const blocked = freshNumber();
    await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: blocked },
    });
    const answers = await placeLiveCalls(w.ctx.deps, [
      request(freshNumber()),
      request(freshNumber()),
      request(freshNumber()),
      request(blocked),
    ]);
    const outcomes = answers.map((a) => (a instanceof ApiError ? a.code : a.status));
    expect(outcomes).toEqual(["initiated", "initiated", "plan_minutes_exhausted", "plan_minutes_exhausted"]);
  });

  test("the hour across a batch: maxCallsPerHour 3 with 12 parallel requests places exactly 3, counted once each", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 100, maxCallsPerHour: 3 });
    batches = [];
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() }),
      ),
    );
    expect(tally(await Promise.all(answers.map(outcomeOf)))).toEqual({
      "201 ok": 3,
      "429 hourly_limit_reached": 9,
    });
    expect(Math.max(...sizes())).toBeGreaterThan(1);
    const [limits] = await w.ctx.deps.sql<{ hour_count: number }[]>`
      select hour_count from call_limits where organization_id = ${seed.org.id}`;
    expect(limits!.hour_count).toBe(3);
  });

  test("contacts in a batch: the organization's goes with its call, another's or a malformed one is 404", async () => {
    const seed = await seedPhoneOrganization(w.ctx);
    const other = await seedPhoneOrganization(w.ctx);
    const own = await createContact(
      w.ctx.deps,
      { organizationId: seed.org.id, livemode: true },
      { phone: freshNumber() },
    );
    const foreign = await createContact(
      w.ctx.deps,
      { organizationId: other.org.id, livemode: true },
      { phone: freshNumber() },
    );
    batches = [];
    const contacts = [own.id, foreign.id, "ct_nope", own.id, foreign.id, own.id];
    const answers = await Promise.all(
      contacts.map(async (contactId) => {
        const res = await placeCall(w.ctx, seed.liveKey, {
          agentId: seed.agent.id,
          to: freshNumber(),
          contactId,
        });
        const body = (await res.clone().json()) as { contactId?: string; error?: { param?: string } };
        return { outcome: await outcomeOf(res), contactId: body.contactId ?? body.error?.param };
      }),
    );
    expect(answers).toEqual([
      { outcome: "201 ok", contactId: own.id },
      { outcome: "404 not_found", contactId: "contactId" },
      { outcome: "404 not_found", contactId: "contactId" },
      { outcome: "201 ok", contactId: own.id },
      { outcome: "404 not_found", contactId: "contactId" },
      { outcome: "201 ok", contactId: own.id },
    ]);
    expect(Math.max(...sizes())).toBeGreaterThan(1);
  });

  test("two organizations in one batch: each on its own limits and minutes", async () => {
    const a = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 2, maxCallsPerHour: 1000 });
    const b = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 3, maxCallsPerHour: 1000 });
    batches = [];
    const answers = await Promise.all(
      Array.from({ length: 16 }, async (_, i) => {
        const seed = i % 2 ? a : b;
        const res = await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() });
        return `${seed === a ? "a" : "b"}: ${await outcomeOf(res)}`;
      }),
    );
    expect(tally(answers)).toEqual({
      "a: 201 ok": 2,
      "a: 429 concurrency_limit_reached": 6,
      "b: 201 ok": 3,
      "b: 429 concurrency_limit_reached": 5,
    });
    expect(batches.some((orgs) => new Set(orgs).size === 2)).toBe(true);
    for (const [seed, placed] of [
      [a, 2],
      [b, 3],
    ] as const) {
      const [usage] = await w.ctx.deps.sql<{ used_minutes: number }[]>`
        select used_minutes from minute_usage where kind = 'plan' and subject_id = ${seed.org.id}`;
      expect(usage!.used_minutes).toBe(placed * 60);
    }
  });
});

describe("two apps with their own pools on one PostgreSQL", () => {
  let shared: SharedPostgres;
  beforeAll(async () => {
    shared = await startSharedPostgres();
  });
  afterAll(() => shared.close());

  test("placements on a connection of their own are answered while every pooled connection is held", async () => {
    const { env } = shared;
    const pool = shared.pool();
    const own = composeDeps({ sql: pool, env, log: silentLogger, placementSql: shared.pool() });
    const onPool = composeDeps({ sql: pool, env, log: silentLogger });
    const seed = await seedOrganization({ deps: own });
    // The answers and ends of calls under way, or any other requests, hold all four.
    const held = await Promise.all(Array.from({ length: 4 }, () => pool.reserve()));
    try {
      const answered = await Promise.race([
        own.batches.livePlacements.run(livePlacement(seed)),
        Bun.sleep(5_000).then(() => "no answer"),
      ]);
      expect(answered).toMatchObject({ status: "initiated" });
      // The same placement on the pool waits for a connection.
      const waiting = onPool.batches.livePlacements.run(livePlacement(seed));
      expect(await Promise.race([waiting, Bun.sleep(300).then(() => "waiting")])).toBe("waiting");
      held.pop()!.release();
      expect(await waiting).toMatchObject({ status: "initiated" });
    } finally {
      for (const conn of held) conn.release();
    }
  });

  test("the rows one app keeps never decide: another app's changes to the organization and the agent apply to its next placement", async () => {
    const [x, y] = twoApps();
    const seed = await seedOrganization({ deps: x });
    // Counts the transactions x's placements take: one look each once x knows the rows.
    let looks = 0;
    const pool = shared.pool();
    const counting = new Proxy(pool, {
      get: (target, key) =>
        key === "reserve"
          ? () => {
              looks++;
              return target.reserve();
            }
          : Reflect.get(target, key),
    });
    const place = async (to = freshNumber()) => {
      looks = 0;
      const [answer] = await placeLiveCalls(x, [livePlacement(seed, to)], undefined, counting);
      return answer instanceof ApiError ? answer.code : (answer as { status: string }).status;
    };
    expect(await place()).toBe("initiated");
    // Its first look read the organization and the agent: a second placed the call.
    expect(looks).toBe(2);
    expect(await place()).toBe("initiated");
    expect(looks).toBe(1);

    const calls = async () =>
      (
        await shared.db.sql<
          { n: number }[]
        >`select count(*)::int as n from calls where organization_id = ${seed.org.id}`
      )[0]!.n;
    const before = await calls();
    const changes: [() => Promise<unknown>, string][] = [
      [() => updateOrganization(y, seed.org.id, { paidPlan: false }), "plan_required"],
      [() => updateOrganization(y, seed.org.id, { paidPlan: true }), "initiated"],
      [() => updateAgent(y, seed.agent.id, { active: false }), "agent_unavailable"],
      [() => updateAgent(y, seed.agent.id, { active: true }), "initiated"],
      [() => updateOrganization(y, seed.org.id, { allowedCountries: ["BE"] }), "country_not_allowed"],
      [() => updateOrganization(y, seed.org.id, { allowedCountries: null }), "initiated"],
      [() => updateOrganization(y, seed.org.id, { planMinutes: 0 }), "plan_minutes_exhausted"],
    ];
    for (const [change, outcome] of changes) {
      await change();
      expect(await place("+33612345678")).toBe(outcome);
      // The change made x look again, with the rows its first look sent back.
      expect(looks).toBe(2);
    }
    expect(await calls()).toBe(before + 3);
  });

  /**
   * Two organizations placed from two apps in opposite orders, y first, while another transaction
   * holds what `hold` takes on the organization whose id sorts second (then ends, `commit` or not):
   * y's batch waits behind it, and x's behind y's. Both batches are answered, every call `initiated`.
   */
  async function oppositeOrders(
    a: Awaited<ReturnType<typeof seedOrganization>>,
    b: Awaited<ReturnType<typeof seedOrganization>>,
    apps: [Deps, Deps],
    hold: (tx: postgres.TransactionSql, organizationId: string) => Promise<unknown>,
    commit: boolean,
  ): Promise<void> {
    const { db } = shared;
    const [x, y] = apps;
    const [first, second] = [a.org.id, b.org.id].sort() as [string, string];
    const [low, high] = first === a.org.id ? [a, b] : [b, a];
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let holding = () => {};
    const holds = new Promise<void>((r) => {
      holding = r;
    });
    const blocker = db.sql
      .begin(async (tx) => {
        await hold(tx, second);
        holding();
        await held;
        if (!commit) throw new Error("rolled back");
      })
      .catch(() => {});
    await holds;
    const waiting = async (n: number) => {
      for (let i = 0; i < 200; i++) {
        const [row] = await db.sql<{ n: number }[]>`
          select count(*)::int as n from pg_locks where not granted`;
        if (row!.n >= n) return;
        await Bun.sleep(10);
      }
      throw new Error(`never ${n} waiting`);
    };
    const ofY = placeLiveCalls(y, [livePlacement(high), livePlacement(low)]);
    await waiting(1);
    const ofX = placeLiveCalls(x, [livePlacement(low), livePlacement(high)]);
    await waiting(2);
    release();
    await blocker;
    const answers = await Promise.allSettled([ofY, ofX]);
    expect(answers.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
    for (const r of answers) {
      for (const call of (r as PromiseFulfilledResult<unknown[]>).value) {
        expect(call).toMatchObject({ status: "initiated" });
      }
    }
  }

  const twoApps = () =>
    [0, 1].map(() => composeDeps({ sql: shared.pool(), env: shared.env, log: silentLogger })) as [Deps, Deps];

  test("two batches naming two organizations in opposite orders, one queued behind the other: no deadlock", async () => {
    const apps = twoApps();
    const [a, b] = [await seedOrganization({ deps: apps[0] }), await seedOrganization({ deps: apps[0] })];
    // Each organization's limits row exists (a first placement makes it).
    for (const seed of [a, b]) expect(await placeLiveCalls(apps[0], [livePlacement(seed)])).toHaveLength(1);
    // Another transaction holds the second organization's limits.
    await oppositeOrders(
      a,
      b,
      apps,
      (tx, id) => tx`select 1 from call_limits where organization_id = ${id} for update`,
      true,
    );
  });

  test("first placements of two organizations in opposite orders while another transaction makes one's limits row: no deadlock, each row made once, its hour counted", async () => {
    const apps = twoApps();
    const [a, b] = [await seedOrganization({ deps: apps[0] }), await seedOrganization({ deps: apps[0] })];
    // Calls placed in the last hour before either organization had a limits row: 2 of a's, 3 of b's.
    for (const [seed, n] of [
      [a, 2],
      [b, 3],
    ] as const) {
      await shared.db.sql`
        insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at,
          placed_at, updated_at)
        select 'call_H' || ${seed.org.id.slice(-8)} || lpad(i::text, 17, '0'), ${seed.org.id}, true, 'completed',
          ${seed.agent.id}, '+33612345678', 'outbound', now() - interval '10 minutes', now() - interval '10 minutes', now()
        from generate_series(1, ${n}) i`;
    }
    // Another transaction is making the second organization's row, and rolls back: y makes the first
    // row and waits for the second, x waits for y's first.
    await oppositeOrders(
      a,
      b,
      apps,
      (tx, id) =>
        tx`insert into call_limits (organization_id, hour_cut, hour_count) values (${id}, now(), 0)`,
      false,
    );
    const rows = await shared.db.sql<{ organization_id: string; hour_count: number }[]>`
      select organization_id, hour_count from call_limits where organization_id in (${a.org.id}, ${b.org.id})`;
    expect(Object.fromEntries(rows.map((r) => [r.organization_id, r.hour_count]))).toEqual({
      [a.org.id]: 2 + 2,
      [b.org.id]: 3 + 2,
    });
  });
});
