import postgres from "postgres";
import type { Clock } from "../../src/clock.ts";
import { driverOptions } from "../../src/db/engine/connection.ts";
import { type Env, parseEnv } from "../../src/env.ts";
import type { OrganizationFields } from "../../src/services/organizations.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import type { RunnerOptions } from "../../src/timers/runner.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";
import { type FakeLiveKit, startFakeLiveKit } from "../helpers/fakeLivekit.ts";

/** What the live phone call tests share: an app whose carrier is a fake LiveKit with a SIP trunk. */

export const TRUNK = "ST_default_trunk";
export const CALLER = "+33180000000";

export interface PhoneWorld {
  ctx: TestContext;
  liveKit: FakeLiveKit;
  close(): Promise<void>;
}

export async function startPhoneWorld(
  opts: {
    timers?: boolean | Partial<RunnerOptions>;
    clock?: Clock;
    env?: Record<string, string>;
    /** Scales the ringing timeout of the fake's `ring_timeout` dials. */
    timeScale?: number;
  } = {},
): Promise<PhoneWorld> {
  const liveKit = await startFakeLiveKit({ timeScale: opts.timeScale ?? 0.01 });
  const ctx = await createTestContext({
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.timers ? { timers: opts.timers } : {}),
    env: {
      ...liveKit.env,
      LIVEKIT_SIP_TRUNK_ID: TRUNK,
      LIVEKIT_SIP_FROM_NUMBER: CALLER,
      ...opts.env,
    },
  });
  return {
    ctx,
    liveKit,
    close: async () => {
      await ctx.close();
      await liveKit.close();
    },
  };
}

export type PhoneSeed = Awaited<ReturnType<typeof seedOrganization>>;

/** An organization with a paid plan, minutes, and the carrier settings given. */
export async function seedPhoneOrganization(
  ctx: TestContext,
  settings: Partial<OrganizationFields> = {},
  opts: { planMinutes?: number } = {},
): Promise<PhoneSeed> {
  const seed = await seedOrganization(ctx, { paidPlan: true, planMinutes: opts.planMinutes ?? 10_000 });
  if (Object.keys(settings).length) await updateOrganization(ctx.deps, seed.org.id, settings);
  return seed;
}

export function placeCall(ctx: TestContext, key: string, json: Record<string, unknown>) {
  return ctx.request("/api/v1/calls", { method: "POST", key, json });
}

/** Row counts of everything placing a live phone call may write. */
export async function placementWrites(ctx: TestContext) {
  const [row] = await ctx.deps.sql<Record<string, number>[]>`select
    (select count(*)::int from calls) as calls,
    (select count(*)::int from timers) as timers,
    (select count(*)::int from tasks) as tasks,
    (select count(*)::int from events) as events,
    (select count(*)::int from minute_reservations) as reservations,
    (select coalesce(sum(used_minutes), 0)::int from minute_usage) as minutes,
    (select coalesce(sum(hour_count), 0)::int from call_limits) as hour_counts`;
  return row!;
}

/** A monotonically new E.164 number per call in this process, so no test collides with another. */
let numbers = 0;
export function freshNumber(prefix = "+336"): string {
  numbers += 1;
  return `${prefix}${String(10_000_000 + numbers).slice(-8)}`;
}

/** How many times each outcome ("201 ok", "429 concurrency_limit_reached", …) was answered. */
export function tally(outcomes: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const o of outcomes) out[o] = (out[o] ?? 0) + 1;
  return out;
}

/**
 * A PostgreSQL database of the test's own and a fake LiveKit with the default trunk, for apps that
 * each have a pool of their own (two processes, as far as the database can tell).
 */
export interface SharedPostgres {
  db: TestDatabase;
  liveKit: FakeLiveKit;
  /** The environment of an app placing live phone calls through the fake. */
  env: Env;
  /** A pool of four connections of its own, ended by `close`. */
  pool(): postgres.Sql;
  close(): Promise<void>;
}

export async function startSharedPostgres(): Promise<SharedPostgres> {
  const db = await createTestDatabase("postgres");
  const liveKit = await startFakeLiveKit();
  const pools: postgres.Sql[] = [];
  return {
    db,
    liveKit,
    env: parseEnv({ ...liveKit.env, LIVEKIT_SIP_TRUNK_ID: TRUNK }),
    pool: () => {
      const sql = postgres(db.url!, { ...driverOptions, max: 4 });
      pools.push(sql);
      return sql;
    },
    close: async () => {
      await Promise.all(pools.map((p) => p.end({ timeout: 1 })));
      await liveKit.close();
      await db.close();
    },
  };
}
