import type { Db } from "./engine/connection.ts";
import type { OrganizationRow } from "./organizations.ts";

/**
 * Statements that decide whether a live phone call may be placed: what the checks read (the
 * organization, its plan usage, the do-not-call list) and the organization's limits row, locked by
 * every placement (call_limits, sql/0016).
 */

/** A live phone call in progress counts against the organization's maxConcurrentCalls. */
const LIVE_PHONE = "livemode and direction = 'outbound'";

export interface CallFacts {
  organization: OrganizationRow;
  /** Plan minutes counted this month (reservations of running calls included). */
  plan_used: number;
  /** Whether `to` is on the organization's live do-not-call list. */
  blocked: boolean;
}

/** The organization, its plan usage for `month` and whether `to` is blocked, in one statement; null without it. */
export async function readCallFacts(
  sql: Db,
  organizationId: string,
  to: string | null,
  month: string,
): Promise<CallFacts | null> {
  const [row] = await sql<(OrganizationRow & { plan_used: number; blocked: boolean })[]>`
    select o.*,
      coalesce((select u.used_minutes from minute_usage u
        where u.kind = 'plan' and u.subject_id = o.id and u.month = ${month}), 0)::int as plan_used,
      exists(select 1 from blocked_numbers b
        where b.organization_id = o.id and b.livemode and b.phone = ${to}::text) as blocked
    from organizations o where o.id = ${organizationId}`;
  if (!row) return null;
  const { plan_used, blocked, ...organization } = row;
  return { organization, plan_used, blocked };
}

export interface HourState {
  /** `count` placements have `placed_at` > `cut`. */
  cut: Date;
  count: number;
}

/**
 * Locks the organization's limits row until the transaction ends (creating it, with the hour counted
 * from the calls, on first use). Every placement takes this lock first, so what is read after it
 * (in a later statement: a statement's snapshot is taken before it waits) includes every placement
 * committed before.
 */
export async function lockCallLimits(sql: Db, organizationId: string, hourAgo: Date): Promise<HourState> {
  const [row] = await sql<{ hour_cut: Date; hour_count: number }[]>`
    insert into call_limits as l (organization_id, hour_cut, hour_count)
    values (${organizationId}, ${hourAgo}, (
      select count(*)::int from calls
      where organization_id = ${organizationId} and ${sql.unsafe(LIVE_PHONE)} and placed_at > ${hourAgo}))
    on conflict (organization_id) do update set hour_count = l.hour_count
    returning l.hour_cut, l.hour_count`;
  return { cut: row!.hour_cut, count: row!.hour_count };
}

export interface CallLoad {
  /** Live phone calls `initiated`, `ringing` or `ongoing`. */
  inProgress: number;
  /** Placements after `from` up to `to` (those leaving the hour since the last check). */
  left: number;
  /** The earliest placement after `to`: when it leaves the hour, the hour has room again. */
  oldest: Date | null;
}

/** Under the lock: calls in progress, and the placements between two cuts of the hour. */
export async function readCallLoad(
  sql: Db,
  organizationId: string,
  cuts: { from: Date; to: Date },
): Promise<CallLoad> {
  const live = sql.unsafe(LIVE_PHONE);
  const [row] = await sql<{ in_progress: number; left: number; oldest: Date | null }[]>`
    select
      (select count(*)::int from calls where organization_id = ${organizationId} and ${live}
        and status in ('initiated', 'ringing', 'ongoing')) as in_progress,
      (select count(*)::int from calls where organization_id = ${organizationId} and ${live}
        and placed_at > ${cuts.from} and placed_at <= ${cuts.to}) as left,
      (select min(placed_at) from calls where organization_id = ${organizationId} and ${live}
        and placed_at > ${cuts.to}) as oldest`;
  return { inProgress: row!.in_progress, left: row!.left, oldest: row!.oldest };
}

/** Writes the hour's new cut and count (the lock is held). */
export async function recordHour(sql: Db, organizationId: string, hour: HourState): Promise<void> {
  await sql`
    update call_limits set hour_cut = ${hour.cut}, hour_count = ${hour.count}
    where organization_id = ${organizationId}`;
}
