import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { KeyedCoalescer, STATEMENT_COALESCING } from "../../src/db/engine/coalesce.ts";
import { refusedByDatabase } from "../../src/db/engine/connection.ts";
import type { LivePlacement } from "../../src/deps.ts";
import { placeLiveCalls } from "../../src/services/calls.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { outcomeOf } from "../helpers/errors.ts";
import {
  freshNumber,
  type PhoneWorld,
  placeCall,
  placementWrites,
  seedPhoneOrganization,
  startPhoneWorld,
  tally,
} from "./support.ts";

/**
 * Live calls that `POST /v1/calls` places now go out in one transaction per batch of an
 * organization (services/calls.ts, `placeLiveCalls`): each request of a batch gets the answer it
 * would have had alone, on the limits and minutes as the requests before it in the batch left them.
 */

let w: PhoneWorld;
/** The size of every batch the app placed since the last `track()`. */
let batches: number[] = [];

beforeAll(async () => {
  w = await startPhoneWorld();
  const deps = w.ctx.deps;
  // The app's own batching, with each batch's size noted.
  deps.batches.livePlacements = new KeyedCoalescer<
    LivePlacement,
    Awaited<ReturnType<typeof placeLiveCalls>>[number]
  >(
    async (request) => {
      batches.push(1);
      return (await placeLiveCalls(deps, [request]))[0]!;
    },
    (requests) => {
      batches.push(requests.length);
      return placeLiveCalls(deps, requests);
    },
    { maxBatch: STATEMENT_COALESCING.maxBatch, maxInFlight: 1, refusedByDatabase },
  );
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
    expect(Math.max(...batches)).toBeGreaterThan(1);
    expect(batches.reduce((a, b) => a + b, 0)).toBe(20);
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
    expect(Math.max(...batches)).toBeGreaterThan(1);
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
    expect(Math.max(...batches)).toBeGreaterThan(1);
    const [limits] = await w.ctx.deps.sql<{ hour_count: number }[]>`
      select hour_count from call_limits where organization_id = ${seed.org.id}`;
    expect(limits!.hour_count).toBe(3);
  });

  test("two organizations' requests never share a transaction, and each organization's batches end when idle", async () => {
    const a = await seedPhoneOrganization(w.ctx);
    const b = await seedPhoneOrganization(w.ctx);
    const seen: string[][] = [];
    const deps = w.ctx.deps;
    const saved = deps.batches.livePlacements;
    deps.batches.livePlacements = new KeyedCoalescer<
      LivePlacement,
      Awaited<ReturnType<typeof placeLiveCalls>>[number]
    >(
      async (request) => {
        seen.push([request.auth.organizationId]);
        return (await placeLiveCalls(deps, [request]))[0]!;
      },
      (requests) => {
        seen.push(requests.map((r) => r.auth.organizationId));
        return placeLiveCalls(deps, requests);
      },
      { maxBatch: STATEMENT_COALESCING.maxBatch, maxInFlight: 1, refusedByDatabase },
    );
    try {
      const answers = await Promise.all(
        Array.from({ length: 16 }, (_, i) => {
          const seed = i % 2 ? a : b;
          return placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() });
        }),
      );
      expect(answers.map((r) => r.status)).toEqual(Array(16).fill(201));
      for (const batch of seen) expect(new Set(batch).size).toBe(1);
      expect(Math.max(...seen.map((s) => s.length))).toBeGreaterThan(1);
      expect(deps.batches.livePlacements.keys).toBe(0);
    } finally {
      deps.batches.livePlacements = saved;
    }
  });
});
