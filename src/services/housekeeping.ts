import type { Db } from "../db/engine/connection.ts";
import { deleteEventsBefore } from "../db/events.ts";
import { lockUsage, pastPlanReturns } from "../db/minutes.ts";
import { deleteIdleRateLimitWindows } from "../db/rateLimits.ts";
import { deleteStaleSessionData } from "../db/sessionTokens.ts";
import { analyzeTable, tablesWithStaleStatistics } from "../db/statistics.ts";
import { bringSingleTimerForward, ensureSingleTimer } from "../db/timers.ts";
import type { VacuumLimits } from "../db/vacuum.ts";
import type { Deps } from "../deps.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { HandlerContext, TimerHandler } from "../timers/types.ts";
import { monthOf } from "./minutes.ts";
import { RATE_LIMITS } from "./rateLimit.ts";
import { IDEMPOTENCY_TTL_MS, SESSION_TOKEN_TTL_MS } from "./sessionTokens.ts";
import { VACUUM_LIMITS, vacuumDue, vacuumTables } from "./vacuum.ts";

/**
 * Housekeeping: rows that only served a while are removed by one periodic durable timer, never on a
 * request's path. Each pass removes
 * - idempotency records past their 24 hours, and session tokens expired for longer than that (a replay
 *   may still need a token's row until its record expires);
 * - rate-limit windows whose hits all left the window;
 * - accepted bot-check tokens past the time they are remembered;
 * - plan minutes given back in an earlier month and still pending on their reservations (a call that
 *   ended after its month's last placement): taken into that month's plan row, as a lock of the row
 *   does for the current month (db/minutes.ts), so the past months' rows end up exact;
 * - events and webhook deliveries older than EVENT_RETENTION_DAYS, a bounded batch of events per pass
 *   (so a pass never holds locks long, nor reads more than its batch): the oldest events with their
 *   finished deliveries. A delivery still pending a retry is never removed (its retries run for more
 *   than a day), nor one made after the limit (a redelivery); each keeps its event. While batches come
 *   out full of old events, the next pass comes sooner and goes on after the last event it read, so
 *   events kept that way are stepped over rather than read again and again; once a pass reaches recent
 *   events, the next walk starts from the oldest again.
 * Every decision that these rows serve stays right whether or not a pass has run.
 */

export const HOUSEKEEPING_EVERY_MS = 10 * 60 * 1000;
/** The next pass when the last one left old events behind. */
export const HOUSEKEEPING_CATCH_UP_MS = 10 * 1000;
/** Events looked at per pass at most (each with its deliveries: one per endpoint that received it). */
export const RETENTION_BATCH = 1_000;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * How often the statistics are checked for tables that grew past a small size (and, in a full check,
 * against every table's growth and changes). Often, because of what a pooled connection keeps: the
 * generic plan of each prepared statement, made once. Made while a table held a page or two (a new
 * database, a table analyzed empty after migrations), it scans the whole table; kept, it goes on
 * scanning as the table grows, on every execution, until an analyze of the table makes every
 * connection plan again. At a minute, a live call's updates by primary key each read thousands of rows
 * by the time the first check came (BENCHMARKS.md, "plans kept from a small table"). A check costs
 * 1.5 ms on PostgreSQL and 5 ms on the embedded database (the vacuum check of a full one,
 * FULL_CHECK_EVERY_MS, 2 and 3 ms more).
 */
export const STATISTICS_EVERY_MS = 5 * 1000;

/**
 * Makes sure the periodic timers (housekeeping, statistics) are pending: any process may call it at
 * start, one row of each results.
 */
export async function scheduleHousekeeping(deps: Pick<Deps, "sql">): Promise<void> {
  await ensureSingleTimer(deps.sql, TIMER_KINDS.housekeeping, 0);
  await ensureSingleTimer(deps.sql, TIMER_KINDS.statistics, 0);
}

/**
 * One pass: removes what has served its time; returns how many rows of each kind went, and where the
 * next pass's walk through old events goes on from (`retentionFrom`, null: from the oldest).
 */
export async function housekeepingPass(
  sql: Db,
  deps: Pick<Deps, "clock" | "env">,
  retentionFrom: string | null = null,
) {
  const now = deps.clock.now().getTime();
  const retention = await deleteEventsBefore(
    sql,
    new Date(now - deps.env.EVENT_RETENTION_DAYS * DAY_MS),
    RETENTION_BATCH,
    retentionFrom,
  );
  return {
    events: retention.events,
    deliveries: retention.deliveries,
    /** Old events may be left for another pass, which goes on from here. */
    retentionFrom: retention.next,
    ...(await deleteStaleSessionData(
      sql,
      new Date(now - IDEMPOTENCY_TTL_MS),
      new Date(now - IDEMPOTENCY_TTL_MS - SESSION_TOKEN_TTL_MS),
    )),
    rateLimitWindows: await removeIdleWindows(sql, now),
    pastPlanReturns: await foldPastPlanReturns(sql, deps.clock.now()),
  };
}

/** Past months' rows folded per pass at most (each one lock and one statement). */
export const PLAN_RETURNS_BATCH = 100;

/**
 * Takes in the plan minutes of earlier months that still wait on their reservations: each month's row
 * locked in the order of organization and month, as every lock of these rows is ordered.
 */
async function foldPastPlanReturns(sql: Db, now: Date): Promise<number> {
  const due = await pastPlanReturns(sql, monthOf(now), PLAN_RETURNS_BATCH);
  for (const { organization_id, month } of due) await lockUsage(sql, "plan", organization_id, month);
  return due.length;
}

/** The windows of every limit whose hits all left the window. */
async function removeIdleWindows(sql: Db, now: number): Promise<number> {
  let removed = 0;
  for (const rule of RATE_LIMITS) {
    removed += await deleteIdleRateLimitWindows(sql, rule.bucket, new Date(now - rule.windowSeconds * 1000));
  }
  return removed;
}

/**
 * The `housekeeping` timer: one pass, then the next one in HOUSEKEEPING_EVERY_MS, or sooner to catch
 * up (its payload says where the walk through old events goes on from).
 */
export function housekeeping(deps: Deps): TimerHandler {
  return async ({ tx, timer, schedule }: HandlerContext) => {
    const from = timer.payload.retentionFrom;
    const removed = await housekeepingPass(tx, deps, typeof from === "string" ? from : null);
    await schedule({
      kind: TIMER_KINDS.housekeeping,
      delayMs: removed.retentionFrom ? HOUSEKEEPING_CATCH_UP_MS : HOUSEKEEPING_EVERY_MS,
      payload: removed.retentionFrom ? { retentionFrom: removed.retentionFrom } : {},
    });
    deps.log.debug("housekeeping", removed);
  };
}

/** A change of at least this many rows in one transaction is a bulk change (see `afterBulkChange`). */
export const BULK_CHANGE_ROWS = 500;

/**
 * After a bulk change (a campaign's contacts, a long document's chunks), in its transaction: the
 * statistics check runs now rather than at its next turn, so plans learn of the new rows at once.
 */
export async function afterBulkChange(sql: Db, rows: number): Promise<void> {
  if (rows >= BULK_CHANGE_ROWS) await bringSingleTimerForward(sql, TIMER_KINDS.statistics);
}

/**
 * How often the same timer makes a full check: every table's growth and changes since its analysis
 * (db/statistics.ts), and the tables to vacuum (where the server does not); once a minute, as before
 * the statistics were checked every few seconds. Both cost the embedded database its one session
 * while they run: a large table that many calls fill or update crosses its fifth or its tenth every
 * few seconds, and looking every 5 s would analyze it that often (the mixed benchmark's `events`, on
 * the embedded database); a vacuum as soon as each churning table crossed its threshold would mean
 * more, smaller stalls for no less work.
 */
export const FULL_CHECK_EVERY_MS = 60 * 1000;

/**
 * The `statistics` timer: analyzes the tables whose statistics lag behind their rows (grown past a
 * small size, or, in a full check, grown by a fifth or many inserted, updated or deleted:
 * db/statistics.ts), so that plans follow the data without autovacuum, then checks again in
 * STATISTICS_EVERY_MS. A full check (every FULL_CHECK_EVERY_MS: the timer's payload keeps when the
 * last one ran; a new timer makes one at once) also vacuums, where the server does not vacuum by
 * itself, the tables that need it, once the check has committed (services/vacuum.ts).
 */
export function refreshStatistics(deps: Deps, limits: VacuumLimits = VACUUM_LIMITS): TimerHandler {
  return async ({ tx, timer, schedule, afterCommit }: HandlerContext) => {
    const now = deps.clock.now().getTime();
    const last = Number(timer.payload.fullCheckAt ?? Number.NEGATIVE_INFINITY);
    // A payload that says nothing readable (NaN) makes a full check.
    const full = !(now - last < FULL_CHECK_EVERY_MS);
    const stale = await tablesWithStaleStatistics(tx, { full });
    for (const table of stale) await analyzeTable(tx, table);
    const due = full ? await vacuumDue(tx, limits) : [];
    await schedule({
      kind: TIMER_KINDS.statistics,
      delayMs: STATISTICS_EVERY_MS,
      payload: { fullCheckAt: full ? now : last },
    });
    if (stale.length) deps.log.debug("statistics refreshed", { tables: stale });
    if (due.length) afterCommit(() => void vacuumTables(deps, due));
  };
}
