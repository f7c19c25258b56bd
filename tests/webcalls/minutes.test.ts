import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { ApiError } from "../../src/errors.ts";
import { createPublishableKey } from "../../src/services/keys.ts";
import {
  MAX_CALL_SECONDS,
  monthOf,
  type ReserveInput,
  reserveMinutes,
  secondsUntilNextMonth,
  settleMinutes,
  usedMinutes,
} from "../../src/services/minutes.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { TEST_DATABASE } from "../helpers/db.ts";
import { newId } from "../helpers/ids.ts";

let ctx: TestContext;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
});
afterAll(() => ctx.close());

/** An organization and a publishable key with the given plan minutes and cap. */
async function setup(opts: { planMinutes?: number; cap?: number; paidPlan?: boolean } = {}) {
  const s = await seedOrganization(ctx, {
    planMinutes: opts.planMinutes ?? 10_000,
    cap: opts.cap ?? 10_000,
    paidPlan: opts.paidPlan ?? true,
  });
  return s;
}

function reserve(input: Omit<ReserveInput, "callId"> & { callId?: string }) {
  const callId = input.callId ?? newId("call", clock);
  return ctx.db.sql
    .begin((tx) => reserveMinutes(tx, clock, { ...input, callId }))
    .then((r) => ({ ...(r as { maxSeconds: number; reservedMinutes: number }), callId }));
}

async function refusal(p: Promise<unknown>): Promise<{ code: string; status: number; retryAfter?: string }> {
  const err = await p.then(
    () => null,
    (e) => e,
  );
  if (!(err instanceof ApiError)) throw new Error(`expected an ApiError, got ${err}`);
  return {
    code: err.code,
    status: err.status,
    ...(err.headers["Retry-After"] ? { retryAfter: err.headers["Retry-After"] } : {}),
  };
}

describe("months and Retry-After", () => {
  test("the month is the calendar month in UTC", () => {
    expect(monthOf(new Date("2026-11-30T23:59:59.999Z"))).toBe("2026-11-01");
    expect(monthOf(new Date("2026-12-01T00:00:00.000Z"))).toBe("2026-12-01");
    expect(monthOf(new Date("2026-12-31T23:30:00.000-02:00"))).toBe("2027-01-01");
  });

  test("seconds until the next UTC month, rounded up, at least 1", () => {
    expect(secondsUntilNextMonth(new Date("2026-11-30T23:59:00.000Z"))).toBe(60);
    expect(secondsUntilNextMonth(new Date("2026-11-30T23:59:59.500Z"))).toBe(1);
    expect(secondsUntilNextMonth(new Date("2026-12-31T00:00:00.000Z"))).toBe(86_400);
    expect(secondsUntilNextMonth(new Date("2026-11-21T09:30:00.000Z"))).toBe(
      (Date.UTC(2026, 11, 1) - Date.UTC(2026, 10, 21, 9, 30)) / 1000,
    );
  });
});

describe("reserveMinutes", () => {
  test("a simulated call reserves nothing and may last 600 seconds", async () => {
    const s = await setup({ planMinutes: 0, cap: 1 });
    const r = await reserve({ organizationId: s.org.id, livemode: false, publishableKeyId: null });
    expect(r.maxSeconds).toBe(MAX_CALL_SECONDS);
    expect(r.reservedMinutes).toBe(0);
    const [n] = await ctx.db.sql<{ n: number }[]>`
      select count(*)::int as n from minute_reservations where call_id = ${r.callId}`;
    expect(n!.n).toBe(0);
  });

  test("plenty left: maxSeconds 600, ten minutes reserved on the plan and the key", async () => {
    const s = await setup();
    const r = await reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: s.publishable.id });
    expect(r).toMatchObject({ maxSeconds: 600, reservedMinutes: 10 });
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(10);
    expect(await usedMinutes(ctx.db.sql, clock, { publishableKeyId: s.publishable.id })).toBe(10);
  });

  test("a live session call reserves plan minutes only", async () => {
    const s = await setup();
    await reserve({ organizationId: s.org.id, livemode: true });
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(10);
    expect(await usedMinutes(ctx.db.sql, clock, { publishableKeyId: s.publishable.id })).toBe(0);
  });

  test("maxSeconds is the smallest of 600, the key's remaining cap and the remaining plan minutes", async () => {
    const byCap = await setup({ cap: 4 });
    expect(
      await reserve({ organizationId: byCap.org.id, livemode: true, publishableKeyId: byCap.publishable.id }),
    ).toMatchObject({ maxSeconds: 240, reservedMinutes: 4 });
    const byPlan = await setup({ planMinutes: 3, cap: 7 });
    expect(
      await reserve({
        organizationId: byPlan.org.id,
        livemode: true,
        publishableKeyId: byPlan.publishable.id,
      }),
    ).toMatchObject({ maxSeconds: 180, reservedMinutes: 3 });
    expect(await usedMinutes(ctx.db.sql, clock, { publishableKeyId: byPlan.publishable.id })).toBe(3);
  });

  test("an exhausted cap is 429 minute_cap_reached with Retry-After until the next month", async () => {
    const s = await setup({ cap: 10 });
    await reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: s.publishable.id });
    expect(
      await refusal(
        reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: s.publishable.id }),
      ),
    ).toEqual({
      code: "minute_cap_reached",
      status: 429,
      retryAfter: String(secondsUntilNextMonth(clock.now())),
    });
    // Another key of the same organization has its own cap.
    const other = await createPublishableKey({ ...ctx.deps, clock }, s.org.id, {
      agentId: s.agent.id,
      allowedOrigins: ["https://a.example.com"],
      monthlyMinuteCap: 5,
    });
    expect(
      await reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: other.id }),
    ).toMatchObject({ maxSeconds: 300 });
  });

  test("exhausted plan minutes are 403 plan_minutes_exhausted, checked before the cap", async () => {
    const s = await setup({ planMinutes: 0, cap: 1 });
    await ctx.db.sql`
      insert into minute_usage (kind, subject_id, month, used_minutes)
      values ('key', ${s.publishable.id}, ${monthOf(clock.now())}, 1)`;
    expect(
      await refusal(
        reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: s.publishable.id }),
      ),
    ).toEqual({ code: "plan_minutes_exhausted", status: 403 });
    expect(await refusal(reserve({ organizationId: s.org.id, livemode: true }))).toEqual({
      code: "plan_minutes_exhausted",
      status: 403,
    });
  });

  test("a plan allowance lowered below usage leaves nothing (and no negative maxSeconds)", async () => {
    const s = await setup({ planMinutes: 20 });
    await reserve({ organizationId: s.org.id, livemode: true });
    await updateOrganization({ ...ctx.deps, clock }, s.org.id, { paidPlan: true, planMinutes: 5 });
    expect((await refusal(reserve({ organizationId: s.org.id, livemode: true }))).code).toBe(
      "plan_minutes_exhausted",
    );
  });

  test("a rolled-back transaction reserves nothing", async () => {
    const s = await setup();
    const callId = newId("call", clock);
    await ctx.db.sql
      .begin(async (tx) => {
        await reserveMinutes(tx, clock, {
          callId,
          organizationId: s.org.id,
          livemode: true,
          publishableKeyId: s.publishable.id,
        });
        throw new Error("creating the call failed");
      })
      .catch(() => {});
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(0);
    expect(await usedMinutes(ctx.db.sql, clock, { publishableKeyId: s.publishable.id })).toBe(0);
  });

  test("15 parallel reservations on one key never reserve beyond its cap", async () => {
    const s = await setup({ cap: 25 });
    const results = await Promise.allSettled(
      Array.from({ length: 15 }, () =>
        reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: s.publishable.id }),
      ),
    );
    const granted = results.filter(
      (r): r is PromiseFulfilledResult<{ maxSeconds: number; reservedMinutes: number; callId: string }> =>
        r.status === "fulfilled",
    );
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(granted.map((g) => g.value.reservedMinutes).sort((a, b) => a - b)).toEqual([5, 10, 10]);
    expect(refused.map((r) => (r.reason as ApiError).code)).toEqual(Array(12).fill("minute_cap_reached"));
    expect(await usedMinutes(ctx.db.sql, clock, { publishableKeyId: s.publishable.id })).toBe(25);
    const [sum] = await ctx.db.sql<{ total: number }[]>`
      select coalesce(sum(reserved_minutes), 0)::int as total from minute_reservations
      where publishable_key_id = ${s.publishable.id}`;
    expect(sum!.total).toBe(25);
  });

  test("15 parallel reservations on one organization's plan never reserve beyond its minutes", async () => {
    const s = await setup({ planMinutes: 33 });
    const results = await Promise.allSettled(
      Array.from({ length: 15 }, () => reserve({ organizationId: s.org.id, livemode: true })),
    );
    const total = results.reduce((n, r) => n + (r.status === "fulfilled" ? r.value.reservedMinutes : 0), 0);
    expect(total).toBe(33);
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(33);
  });
});

describe("minutes given back wait on the reservation, not on the plan's row", () => {
  const planRow = async (organizationId: string) => {
    const [row] = await ctx.db.sql<{ used_minutes: number }[]>`
      select used_minutes from minute_usage where kind = 'plan' and subject_id = ${organizationId}`;
    return row!.used_minutes;
  };
  const pending = async (organizationId: string) => {
    const [row] = await ctx.db.sql<{ n: number }[]>`
      select count(*)::int as n from minute_reservations
      where organization_id = ${organizationId} and plan_return_pending`;
    return row!.n;
  };

  test("every read subtracts what is pending; the next lock of the plan's row takes it in", async () => {
    const s = await setup({ planMinutes: 25 });
    const a = await reserve({ organizationId: s.org.id, livemode: true });
    const b = await reserve({ organizationId: s.org.id, livemode: true });
    expect(await settleMinutes(ctx.db.sql, clock, a.callId, 90)).toEqual({
      keptMinutes: 2,
      returnedMinutes: 8,
    });
    // The row still counts the whole reservation; every reader sees what it should.
    expect(await planRow(s.org.id)).toBe(20);
    expect(await pending(s.org.id)).toBe(1);
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(12);
    // The next reservation sees 13 minutes left (not 5) and folds the return into the row.
    const c = await reserve({ organizationId: s.org.id, livemode: true });
    expect(c.reservedMinutes).toBe(10);
    expect(await planRow(s.org.id)).toBe(22);
    expect(await pending(s.org.id)).toBe(0);
    expect(await settleMinutes(ctx.db.sql, clock, b.callId, null)).toEqual({
      keptMinutes: 0,
      returnedMinutes: 10,
    });
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(12);
  });

  test.skipIf(TEST_DATABASE === "embedded")(
    "a call's end does not wait while another transaction holds the plan's row (PostgreSQL: two sessions)",
    async () => {
      const s = await setup();
      const r = await reserve({ organizationId: s.org.id, livemode: true });
      const released = Promise.withResolvers<void>();
      const locked = Promise.withResolvers<void>();
      const holder = ctx.db.sql.begin(async (tx) => {
        await tx`select 1 from minute_usage where kind = 'plan' and subject_id = ${s.org.id} for update`;
        locked.resolve();
        await released.promise;
      });
      try {
        await locked.promise;
        const settled = await Promise.race([
          settleMinutes(ctx.db.sql, clock, r.callId, 30),
          Bun.sleep(3_000).then(() => "waited for the plan's row" as const),
        ]);
        expect(settled).toEqual({ keptMinutes: 1, returnedMinutes: 9 });
        expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(1);
      } finally {
        released.resolve();
        await holder;
      }
    },
  );
});

describe("settleMinutes", () => {
  test("keeps ceil(actual/60) and returns the rest, on the plan and on the key", async () => {
    const s = await setup();
    const r = await reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: s.publishable.id });
    expect(await settleMinutes(ctx.db.sql, clock, r.callId, 61)).toEqual({
      keptMinutes: 2,
      returnedMinutes: 8,
    });
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(2);
    expect(await usedMinutes(ctx.db.sql, clock, { publishableKeyId: s.publishable.id })).toBe(2);
  });

  test("settling twice changes nothing", async () => {
    const s = await setup();
    const r = await reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: s.publishable.id });
    await settleMinutes(ctx.db.sql, clock, r.callId, 125);
    expect(await settleMinutes(ctx.db.sql, clock, r.callId, 5)).toBeNull();
    expect(await settleMinutes(ctx.db.sql, clock, r.callId, null)).toBeNull();
    expect(await usedMinutes(ctx.db.sql, clock, { publishableKeyId: s.publishable.id })).toBe(3);
    const results = await Promise.all(
      Array.from({ length: 5 }, () => settleMinutes(ctx.db.sql, clock, r.callId, 1)),
    );
    expect(results.every((x) => x === null)).toBe(true);
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(3);
  });

  test("parallel settlements of one call: exactly one applies", async () => {
    const s = await setup();
    const r = await reserve({ organizationId: s.org.id, livemode: true });
    const results = await Promise.all(
      Array.from({ length: 8 }, () => settleMinutes(ctx.db.sql, clock, r.callId, 30)),
    );
    expect(results.filter((x) => x !== null)).toEqual([{ keptMinutes: 1, returnedMinutes: 9 }]);
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(1);
  });

  test("a call that lasted 0 seconds keeps 1 minute; one that never started keeps none", async () => {
    const s = await setup();
    const a = await reserve({ organizationId: s.org.id, livemode: true });
    expect(await settleMinutes(ctx.db.sql, clock, a.callId, 0)).toEqual({
      keptMinutes: 1,
      returnedMinutes: 9,
    });
    const b = await reserve({ organizationId: s.org.id, livemode: true });
    expect(await settleMinutes(ctx.db.sql, clock, b.callId, null)).toEqual({
      keptMinutes: 0,
      returnedMinutes: 10,
    });
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(1);
  });

  test("a call longer than reserved keeps what was reserved, never more", async () => {
    const s = await setup({ cap: 4 });
    const r = await reserve({ organizationId: s.org.id, livemode: true, publishableKeyId: s.publishable.id });
    expect(await settleMinutes(ctx.db.sql, clock, r.callId, 250)).toEqual({
      keptMinutes: 4,
      returnedMinutes: 0,
    });
    expect(await usedMinutes(ctx.db.sql, clock, { publishableKeyId: s.publishable.id })).toBe(4);
  });

  test("an unknown call settles to null", async () => {
    expect(await settleMinutes(ctx.db.sql, clock, newId("call", clock), 60)).toBeNull();
  });

  test("returned minutes go back to the month the call started in", async () => {
    const c = new ManualClock("2026-11-30T23:58:00.000Z");
    const s = await setup({ cap: 10 });
    const callId = newId("call", c);
    await ctx.db.sql.begin((tx) =>
      reserveMinutes(tx, c, {
        callId,
        organizationId: s.org.id,
        livemode: true,
        publishableKeyId: s.publishable.id,
      }),
    );
    c.set("2026-12-01T00:03:00.000Z");
    expect(await settleMinutes(ctx.db.sql, c, callId, 300)).toEqual({ keptMinutes: 5, returnedMinutes: 5 });
    expect(
      await usedMinutes(ctx.db.sql, new ManualClock("2026-11-15T00:00:00.000Z"), {
        publishableKeyId: s.publishable.id,
      }),
    ).toBe(5);
    expect(await usedMinutes(ctx.db.sql, c, { publishableKeyId: s.publishable.id })).toBe(0);
    // December starts with a full cap.
    const dec = newId("call", c);
    const r = await ctx.db.sql.begin((tx) =>
      reserveMinutes(tx, c, {
        callId: dec,
        organizationId: s.org.id,
        livemode: true,
        publishableKeyId: s.publishable.id,
      }),
    );
    expect(r).toEqual({ maxSeconds: 600, reservedMinutes: 10 });
  });
});
