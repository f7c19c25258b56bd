import type { PendingQuery } from "postgres";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/engine/connection.ts";
import { hitRow, rateLimitHitsSql } from "../db/rateLimits.ts";
import { ApiError } from "../errors.ts";

/**
 * Rolling-window rate limits per client address, held in the database so that every process serving
 * the same database enforces one limit together. Requests for one address are serialised by the row
 * lock of one upsert, which counts the hits of the window and, when allowed, records the new one.
 * Refused requests are not recorded, so `Retry-After` is exact: once that many seconds have passed, a
 * request is allowed again.
 */

export type { RateLimitRow } from "../db/rateLimits.ts";

import type { RateLimitRow } from "../db/rateLimits.ts";

export interface RateLimitRule {
  /** Which limit: addresses are counted separately per bucket. */
  bucket: string;
  limit: number;
  windowSeconds: number;
}

/** 6 web calls per 10 minutes per visitor address. */
export const WEB_CALL_RATE_LIMIT: RateLimitRule = { bucket: "web_calls", limit: 6, windowSeconds: 600 };

/** The demo page mints a session token per load: at most 5 per minute per visitor address. */
export const DEMO_PAGE_RATE_LIMIT: RateLimitRule = { bucket: "demo_tokens", limit: 5, windowSeconds: 60 };

/** Every limit, for the housekeeping of their windows. */
export const RATE_LIMITS: readonly RateLimitRule[] = [WEB_CALL_RATE_LIMIT, DEMO_PAGE_RATE_LIMIT];

export interface RateLimitDecision {
  allowed: boolean;
  /** When refused: seconds until the oldest counted request leaves the window (at least 1). 0 when allowed. */
  retryAfterSeconds: number;
}

export async function hitRateLimit(
  sql: Db,
  clock: Clock,
  address: string,
  rule: RateLimitRule = WEB_CALL_RATE_LIMIT,
): Promise<RateLimitDecision> {
  const hit = rateLimitHit(sql, clock, address, rule);
  const [row] = await hit.sql;
  return hit.decide(row!);
}

export interface RateLimitHit {
  /** The statement that records the hit alone and returns a `RateLimitRow`. */
  sql: PendingQuery<RateLimitRow[]>;
  /** The client address and the moment of the request, for a statement that counts several hits. */
  address: string;
  at: Date;
  decide(row: RateLimitRow): RateLimitDecision;
}

/**
 * A hit as a statement, for callers that run it inside a statement of their own (one commit for the
 * hit and what it guards, see services/webCalls.ts); `hitRateLimit` runs it alone.
 */
export function rateLimitHit(sql: Db, clock: Clock, address: string, rule: RateLimitRule): RateLimitHit {
  const now = clock.now();
  const windowMs = rule.windowSeconds * 1000;
  const statement = rateLimitHitsSql(sql, rule, hitRow(sql, address, now)) as PendingQuery<RateLimitRow[]>;
  return {
    sql: statement,
    address,
    at: now,
    decide(row) {
      if (row.last_allowed) return { allowed: true, retryAfterSeconds: 0 };
      const freeing = new Date(row.hits[row.hits.length - rule.limit]!).getTime();
      return {
        allowed: false,
        retryAfterSeconds: Math.max(1, Math.ceil((freeing + windowMs - now.getTime()) / 1000)),
      };
    },
  };
}

/**
 * One request's hit on the web-call limit, counted exactly once: by `settle()` alone, or by a
 * statement of the caller's that counts it (from `hit`), then `counted()` with its row, so the hit and
 * the work it guards commit together. See http/webCallGate.ts for who counts when.
 */
export class WebCallRateLimit {
  #hit: RateLimitHit;
  #counted = false;

  constructor(hit: RateLimitHit) {
    this.#hit = hit;
  }

  get isCounted(): boolean {
    return this.#counted;
  }

  /** Counts the hit alone unless it already was; throws 429 `rate_limited` when refused. */
  async settle(): Promise<void> {
    if (this.#counted) return;
    const [row] = await this.#hit.sql;
    this.counted(row!);
  }

  /** The address and moment of the hit, for a statement that counts several (`rateLimitHitsSql`). */
  get hit(): { address: string; at: Date } {
    return { address: this.#hit.address, at: this.#hit.at };
  }

  /** Records that the hit was counted (its statement committed); throws 429 when it was refused. */
  counted(row: RateLimitRow): void {
    this.#counted = true;
    const decision = this.#hit.decide(row);
    if (!decision.allowed) throw rateLimited(decision.retryAfterSeconds);
  }
}

function rateLimited(retryAfterSeconds: number): ApiError {
  return new ApiError("rate_limited", "Too many web calls from this address. Try again later.", {
    headers: { "Retry-After": String(retryAfterSeconds) },
  });
}
