import type { Fragment, PendingQuery } from "postgres";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/engine/connection.ts";
import { ApiError } from "../errors.ts";

/**
 * Rolling-window rate limits per client address, held in the database so that every process serving
 * the same database enforces one limit together. Requests for one address are serialised by the row
 * lock of one upsert, which counts the hits of the window and, when allowed, records the new one.
 * Refused requests are not recorded, so `Retry-After` is exact: once that many seconds have passed, a
 * request is allowed again.
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
  sql: Db,
  clock: Clock,
  address: string,
  rule: RateLimitRule = WEB_CALL_RATE_LIMIT,
): Promise<RateLimitDecision> {
  const hit = rateLimitHit(sql, clock, address, rule);
  const [row] = await hit.sql;
  return hit.decide(row!);
}

/** What the hit's statement returns: the address's hits in the window and whether this one passed. */
export interface RateLimitRow {
  hits: Date[];
  last_allowed: boolean;
}

export interface RateLimitHit {
  /** The statement that records the hit and returns a `RateLimitRow`; usable as a `with` entry. */
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
  const statement = rateLimitHitsSql(
    sql,
    rule,
    sql`select ${address}::text as address, ${now}::timestamptz as at`,
  ) as PendingQuery<RateLimitRow[]>;
  return {
    sql: statement,
    address,
    at: now,
    decide(row) {
      void pruneRateLimitWindows(sql, clock, rule);
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
 * The hits of `hits`, a select of `(address text, at timestamptz)` with each address at most once,
 * as a statement (or `with` entry) returning `(address, hits, last_allowed)` per address.
 *
 * The upsert locks each address's row and works on its latest version (`w`, not a snapshot), keeps
 * the hits still in the window, and adds this one only when fewer than `limit` remain. Concurrent
 * requests (any process) queue on the row lock, so exactly `limit` pass. Rows are locked in address
 * order, so two statements of several hits do not wait on each other for these rows (a deadlock
 * through other rows they lock is refused by the database, and their items run again alone, see
 * db/coalesce.ts). A hit is stamped when its
 * request arrives but may be counted later (after the body is read), so the hits are sorted again
 * rather than appended: the newest stays last, which the pruning relies on.
 */
export function rateLimitHitsSql(sql: Db, rule: RateLimitRule, hits: Fragment): Fragment {
  const windowMs = rule.windowSeconds * 1000;
  const windowStart = sql`(excluded.hits[1] - ${windowMs}::float8 * interval '1 millisecond')`;
  return sql`
    insert into rate_limit_windows as w (bucket, address, hits, last_allowed)
    select ${rule.bucket}::text, r.address, array[r.at], ${rule.limit >= 1}::boolean
    from (${hits}) r order by r.address
    on conflict (bucket, address) do update set
      hits = case
        when (select count(*) from unnest(w.hits) h where h > ${windowStart}) >= ${rule.limit}::integer
          then array(select h from unnest(w.hits) h where h > ${windowStart} order by h)
        else array(select h from unnest(w.hits || excluded.hits[1]) h where h > ${windowStart} order by h)
      end,
      last_allowed = (select count(*) from unnest(w.hits) h where h > ${windowStart}) < ${rule.limit}::integer
    returning w.address, w.hits, w.last_allowed`;
}

const lastPrune = new WeakMap<object, number>();

/** Drops the rows of addresses whose hits all left the window; at most once a minute per process. */
async function pruneRateLimitWindows(sql: Db, clock: Clock, rule: RateLimitRule): Promise<void> {
  const now = clock.now().getTime();
  if (now - (lastPrune.get(sql) ?? 0) < 60_000) return;
  lastPrune.set(sql, now);
  try {
    // Rows an upsert holds are skipped (they are in use, and waiting on them in no order could
    // deadlock with a statement counting several hits); a later prune takes them.
    await sql`
      delete from rate_limit_windows where ctid in (
        select ctid from rate_limit_windows
        where bucket = ${rule.bucket} and hits[cardinality(hits)] <= ${new Date(now - rule.windowSeconds * 1000)}
        for update skip locked)`;
  } catch {
    // Housekeeping only: the window kept in each row keeps every decision right regardless.
  }
}

/**
 * One request's hit on the web-call limit, counted exactly once: by `settle()` alone, or inside a
 * statement of the caller's (`inStatement()` as a `with` entry, then `counted()` with its row), so the
 * hit and the work it guards commit together. See http/webCallGate.ts for who counts when.
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

  /** The hit's statement, for a `with` entry of a statement that then reports its row to `counted`. */
  inStatement(): RateLimitHit["sql"] {
    return this.#hit.sql;
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
