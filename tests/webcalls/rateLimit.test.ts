import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { ManualClock } from "../../src/clock.ts";
import { driverOptions } from "../../src/db/engine/connection.ts";
import {
  hitRateLimit,
  type RateLimitRule,
  rateLimitHit,
  WEB_CALL_RATE_LIMIT,
} from "../../src/services/rateLimit.ts";
import { createTestContext, type TestContext } from "../helpers/app.ts";

let ctx: TestContext;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
});
afterAll(() => ctx.close());

const hit = (address: string, c = clock) => hitRateLimit(ctx.db.sql, c, address);

describe("hitRateLimit: 6 per rolling 10 minutes per address", () => {
  test("the rule: at most 6 web calls per address in a rolling 10 minutes", () => {
    expect(WEB_CALL_RATE_LIMIT).toEqual({ bucket: "web_calls", limit: 6, windowSeconds: 600 });
  });

  test("six pass, the seventh is refused with Retry-After until the oldest leaves the window", async () => {
    const c = new ManualClock("2026-11-21T10:00:00.000Z");
    for (let i = 0; i < 6; i++) {
      expect(await hit("198.51.100.1", c)).toEqual({ allowed: true, retryAfterSeconds: 0 });
      c.advance(30_000);
    }
    // Oldest at 10:00:00; now 10:03:00 → it leaves at 10:10:00, 420 s from now.
    expect(await hit("198.51.100.1", c)).toEqual({ allowed: false, retryAfterSeconds: 420 });
    c.advance(400_500);
    expect(await hit("198.51.100.1", c)).toEqual({ allowed: false, retryAfterSeconds: 20 });
  });

  test("refused requests are not counted, so Retry-After is exact and the window rolls", async () => {
    const c = new ManualClock("2026-11-21T11:00:00.000Z");
    for (let i = 0; i < 6; i++) {
      await hit("198.51.100.2", c);
      c.advance(60_000);
    }
    // 11:06: refused; keep hammering.
    for (let i = 0; i < 10; i++) expect((await hit("198.51.100.2", c)).allowed).toBe(false);
    const { retryAfterSeconds } = await hit("198.51.100.2", c);
    expect(retryAfterSeconds).toBe(240);
    c.advance(retryAfterSeconds * 1000);
    expect((await hit("198.51.100.2", c)).allowed).toBe(true);
    // The second oldest (11:01) leaves at 11:11, one minute later.
    expect(await hit("198.51.100.2", c)).toEqual({ allowed: false, retryAfterSeconds: 60 });
  });

  test("a hit counted after a later one (a slow request) keeps the hits in time order", async () => {
    const c = new ManualClock("2026-11-21T12:30:00.000Z");
    const slow = rateLimitHit(ctx.db.sql, c, "198.51.100.30", WEB_CALL_RATE_LIMIT);
    c.advance(5_000);
    await hit("198.51.100.30", c);
    const [row] = await slow.sql;
    expect(slow.decide(row!)).toEqual({ allowed: true, retryAfterSeconds: 0 });
    expect(row!.hits.map((h) => new Date(h).toISOString())).toEqual([
      "2026-11-21T12:30:00.000Z",
      "2026-11-21T12:30:05.000Z",
    ]);
  });

  test("addresses are counted apart", async () => {
    const c = new ManualClock("2026-11-21T12:00:00.000Z");
    for (let i = 0; i < 6; i++) await hit("198.51.100.3", c);
    expect((await hit("198.51.100.3", c)).allowed).toBe(false);
    expect((await hit("198.51.100.4", c)).allowed).toBe(true);
    expect((await hit("2001:db8::3", c)).allowed).toBe(true);
  });

  test("hits that left the window are pruned", async () => {
    const c = new ManualClock("2026-11-21T13:00:00.000Z");
    for (let i = 0; i < 3; i++) await hit("198.51.100.5", c);
    c.advance(11 * 60_000);
    await hit("198.51.100.5", c);
    const [row] = await ctx.db.sql<{ n: number }[]>`
      select cardinality(hits)::int as n from rate_limit_windows where address = '198.51.100.5'`;
    expect(row!.n).toBe(1);
  });

  test("another rule counts in its own bucket", async () => {
    const rule: RateLimitRule = { bucket: "other", limit: 1, windowSeconds: 60 };
    const c = new ManualClock("2026-11-21T14:00:00.000Z");
    expect((await hitRateLimit(ctx.db.sql, c, "198.51.100.6", rule)).allowed).toBe(true);
    expect(await hitRateLimit(ctx.db.sql, c, "198.51.100.6", rule)).toEqual({
      allowed: false,
      retryAfterSeconds: 60,
    });
    expect((await hit("198.51.100.6", c)).allowed).toBe(true);
  });

  test("30 parallel requests from one address: exactly 6 allowed", async () => {
    const c = new ManualClock("2026-11-21T15:00:00.000Z");
    const results = await Promise.all(Array.from({ length: 30 }, () => hit("198.51.100.7", c)));
    expect(results.filter((r) => r.allowed)).toHaveLength(6);
  });

  test("two processes (two separate connection pools) together still allow 6", async () => {
    const c = new ManualClock("2026-11-21T16:00:00.000Z");
    // The embedded database serves a single connection: there, both "processes" share it.
    const second = ctx.db.url ? postgres(ctx.db.url, { ...driverOptions, max: 10 }) : ctx.db.sql;
    try {
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) => hitRateLimit(i % 2 ? second : ctx.db.sql, c, "198.51.100.8")),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(6);
      const [row] = await ctx.db.sql<{ n: number }[]>`
        select cardinality(hits)::int as n from rate_limit_windows where address = '198.51.100.8'`;
      expect(row!.n).toBe(6);
    } finally {
      if (second !== ctx.db.sql) await second.end();
    }
  });
});
