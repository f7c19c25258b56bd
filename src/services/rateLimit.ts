import type { Sql } from "postgres";
import type { Clock } from "../clock.ts";

/**
 * Rolling-window rate limits per client address, held in the database so that every process serving
 * the same database enforces one limit together. Requests for one address are serialised by a
 * transaction-scoped advisory lock; within it the hits of the window are counted and, when allowed,
 * the new one is recorded. Refused requests are not recorded, so `Retry-After` is exact: once that
 * many seconds have passed, a request is allowed again.
 */

export interface RateLimitRule {
  /** Which limit: addresses are counted separately per bucket. */
  bucket: string;
  limit: number;
  windowSeconds: number;
}

/** SPEC.md "Limits": 6 web calls per 10 minutes per visitor address. */
export const WEB_CALL_RATE_LIMIT: RateLimitRule = { bucket: "web_calls", limit: 6, windowSeconds: 600 };

export interface RateLimitDecision {
  allowed: boolean;
  /** When refused: seconds until the oldest counted request leaves the window (at least 1). 0 when allowed. */
  retryAfterSeconds: number;
}

export async function hitRateLimit(
  sql: Sql,
  clock: Clock,
  address: string,
  rule: RateLimitRule = WEB_CALL_RATE_LIMIT,
): Promise<RateLimitDecision> {
  const now = clock.now();
  const windowMs = rule.windowSeconds * 1000;
  const windowStart = new Date(now.getTime() - windowMs);
  const decision = (await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${`rate:${rule.bucket}:${address}`}, 0))`;
    await tx`
      delete from rate_limit_hits
      where bucket = ${rule.bucket} and address = ${address} and hit_at <= ${windowStart}`;
    const hits = await tx<{ hit_at: Date }[]>`
      select hit_at from rate_limit_hits
      where bucket = ${rule.bucket} and address = ${address}
      order by hit_at`;
    if (hits.length >= rule.limit) {
      // The request is allowed once all hits but limit − 1 have left the window.
      const freeing = hits[hits.length - rule.limit]!.hit_at.getTime();
      return {
        allowed: false,
        retryAfterSeconds: Math.max(1, Math.ceil((freeing + windowMs - now.getTime()) / 1000)),
      };
    }
    await tx`insert into rate_limit_hits (bucket, address, hit_at) values (${rule.bucket}, ${address}, ${now})`;
    return { allowed: true, retryAfterSeconds: 0 };
  })) as RateLimitDecision;
  await pruneRateLimitHits(sql, clock, rule);
  return decision;
}

const lastPrune = new WeakMap<object, number>();

/** Drops hits of every address that have left the window; at most once a minute per process. */
async function pruneRateLimitHits(sql: Sql, clock: Clock, rule: RateLimitRule): Promise<void> {
  const now = clock.now().getTime();
  if (now - (lastPrune.get(sql) ?? 0) < 60_000) return;
  lastPrune.set(sql, now);
  try {
    await sql`
      delete from rate_limit_hits
      where bucket = ${rule.bucket} and hit_at <= ${new Date(now - rule.windowSeconds * 1000)}`;
  } catch {
    // Housekeeping only: the per-address delete above keeps every decision right regardless.
  }
}
