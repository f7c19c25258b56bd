import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";

/**
 * Statements of rolling-window rate limits (rate_limit_windows): per bucket and client address, the
 * times of the hits still in the window.
 */

/** What a hit's statement returns: the address's hits in the window and whether this one passed. */
export interface RateLimitRow {
  hits: Date[];
  last_allowed: boolean;
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
 * db/engine/coalesce.ts). A hit is stamped when its
 * request arrives but may be counted later (after the body is read), so the hits are sorted again
 * rather than appended: the newest stays last, which the pruning relies on.
 */
export function rateLimitHitsSql(
  sql: Db,
  rule: { bucket: string; limit: number; windowSeconds: number },
  hits: Fragment,
): Fragment {
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

/** One hit as the rows `rateLimitHitsSql` counts: the client address and the moment of the request. */
export function hitRow(sql: Db, address: string, at: Date): Fragment {
  return sql`select ${address}::text as address, ${at}::timestamptz as at`;
}

/**
 * Drops the rows of a bucket's addresses whose hits all left the window (at or before `windowStart`).
 * Rows an upsert holds are skipped (they are in use, and waiting on them in no order could deadlock
 * with a statement counting several hits); a later pass takes them.
 */
export async function deleteIdleRateLimitWindows(
  sql: Db,
  bucket: string,
  windowStart: Date,
): Promise<number> {
  const deleted = await sql`
    delete from rate_limit_windows where ctid in (
      select ctid from rate_limit_windows
      where bucket = ${bucket} and hits[cardinality(hits)] <= ${windowStart}
      for update skip locked)`;
  return deleted.count;
}
