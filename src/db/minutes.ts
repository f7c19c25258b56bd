import type { Fragment } from "postgres";
import { type Db, settledAll } from "./engine/connection.ts";
import { gathered } from "./engine/gathered.ts";

/**
 * Statements of minute usage (minute_usage: minutes counted per month for an organization's plan or a
 * publishable key's cap) and of the reservations of running calls (minute_reservations).
 */

export type UsageKind = "plan" | "key";

/**
 * Creates the month's usage row if needed and locks it until the transaction ends; returns minutes
 * used. A plan's row takes in, under that lock and in the same round trip, the minutes that ended
 * calls gave back since the last lock (`settleOpenReservation`).
 */
export async function lockUsage(tx: Db, kind: UsageKind, subjectId: string, month: string): Promise<number> {
  if (kind === "plan") return (await lockPlanUsages(tx, [subjectId], month)).get(subjectId)!;
  const [row] = await lockUsageRowsSql(tx, kind, [subjectId], month);
  return row!.used_minutes;
}

/**
 * `lockUsage` of the plans of several organizations at once (a batch of placements): two statements
 * for them all, the rows locked in the order of `organizationIds` (each once, in the order of the ids:
 * db/phonePlacements.ts, `placePhoneCalls`). Minutes used, by organization.
 */
export async function lockPlanUsages(
  tx: Db,
  organizationIds: readonly string[],
  month: string,
): Promise<Map<string, number>> {
  const [locked, folded] = await settledAll(lockPlanUsagesSql(tx, organizationIds, month));
  const used = new Map(locked.map((r) => [r.subject_id, r.used_minutes]));
  for (const r of folded) used.set(r.subject_id, r.used_minutes);
  return used;
}

/** The statements of `lockPlanUsages`, for a caller that sends them in its own order. */
export function lockPlanUsagesSql(tx: Db, organizationIds: readonly string[], month: string) {
  return [
    lockUsageRowsSql(tx, "plan", organizationIds, month),
    foldPlanReturnsSql(tx, organizationIds, month),
  ] as const;
}

/** The usage rows of `subjectIds` for `month`, made when missing and locked, in the order given. */
function lockUsageRowsSql(tx: Db, kind: UsageKind, subjectIds: readonly string[], month: string) {
  return tx<{ subject_id: string; used_minutes: number }[]>`
    insert into minute_usage (kind, subject_id, month, used_minutes)
    select ${kind}::text, s.id, ${month}::date, 0 from unnest(${subjectIds as string[]}::text[]) with ordinality as s(id, n)
    order by s.n
    on conflict (kind, subject_id, month) do update set used_minutes = minute_usage.used_minutes
    returning subject_id, used_minutes`;
}

/**
 * Moves the minutes given back by the organizations' settled reservations of `month` into their plan
 * rows (which the caller has locked): the rows after, none for an organization with nothing pending.
 * (Also explained by the plan tests: it reads the pending reservations only, however many have ended.)
 */
export function foldPlanReturnsSql(tx: Db, organizationIds: readonly string[], month: string) {
  return tx<{ subject_id: string; used_minutes: number }[]>`
    with returned as (
      update minute_reservations set plan_return_pending = false
      where organization_id = any(${organizationIds as string[]}::text[]) and month = ${month} and plan_return_pending
      returning organization_id, reserved_minutes - kept_minutes as minutes
    ),
    per_organization as (
      select organization_id, sum(minutes) as minutes from returned group by organization_id
    )
    update minute_usage u set used_minutes = greatest(0, u.used_minutes - p.minutes)
    from per_organization p
    where u.kind = 'plan' and u.subject_id = p.organization_id and u.month = ${month}
    returning u.subject_id, u.used_minutes`;
}

/**
 * The organizations and months, before `month`, whose plan minutes given back still wait on their
 * reservations (calls that started in a month and ended after its last lock), in the order their rows
 * are to be locked; at most `limit`.
 */
export async function pastPlanReturns(
  sql: Db,
  month: string,
  limit: number,
): Promise<{ organization_id: string; month: string }[]> {
  return [
    ...(await sql<{ organization_id: string; month: string }[]>`
      select distinct organization_id, to_char(month, 'YYYY-MM-DD') as month from minute_reservations
      where plan_return_pending and month < ${month}
      order by organization_id, month
      limit ${limit}`),
  ];
}

/**
 * The plan minutes an organization (`organizationId`, an SQL expression such as a column) used in
 * `month`: its row less what ended calls gave back and no lock has taken in yet.
 */
export function planUsedSql(sql: Db, organizationId: Fragment, month: string): Fragment {
  return sql`greatest(0,
    coalesce((select u.used_minutes from minute_usage u
      where u.kind = 'plan' and u.subject_id = ${organizationId} and u.month = ${month}), 0)
    - coalesce((select sum(r.reserved_minutes - r.kept_minutes) from minute_reservations r
      where r.organization_id = ${organizationId} and r.month = ${month} and r.plan_return_pending), 0))::int`;
}

/** Adds minutes to the month's plan row, and to the key's row when there is a key. */
export async function addUsage(
  tx: Db,
  month: string,
  organizationId: string,
  publishableKeyId: string | null,
  minutes: number,
): Promise<void> {
  await tx`
    update minute_usage set used_minutes = used_minutes + ${minutes}
    where month = ${month} and ((kind = 'plan' and subject_id = ${organizationId})
      ${publishableKeyId ? tx`or (kind = 'key' and subject_id = ${publishableKeyId})` : tx``})`;
}

/** Takes minutes back from a usage row (never below zero). */
export async function subtractUsage(
  tx: Db,
  kind: UsageKind,
  subjectId: string,
  month: string,
  minutes: number,
): Promise<void> {
  await tx`
    update minute_usage set used_minutes = greatest(0, used_minutes - ${minutes})
    where kind = ${kind} and subject_id = ${subjectId} and month = ${month}`;
}

/** Minutes counted for a subject in a month (0 without a row; a plan's less what ended calls gave back). */
export async function usageOf(sql: Db, kind: UsageKind, subjectId: string, month: string): Promise<number> {
  if (kind === "plan") {
    const [row] = await sql<{ used: number }[]>`select ${planUsedSql(sql, sql`${subjectId}`, month)} as used`;
    return row!.used;
  }
  const [row] = await sql<{ used_minutes: number }[]>`
    select used_minutes from minute_usage where kind = ${kind} and subject_id = ${subjectId} and month = ${month}`;
  return row?.used_minutes ?? 0;
}

export interface ReservationRow {
  call_id: string;
  organization_id: string;
  publishable_key_id: string | null;
  plan_charged: boolean;
  /** `YYYY-MM-01`. */
  month: string;
  reserved_minutes: number;
  max_seconds: number;
  created_at: Date;
}

export async function insertReservation(tx: Db, r: ReservationRow): Promise<void> {
  await tx`
    insert into minute_reservations
      (call_id, organization_id, publishable_key_id, plan_charged, month, reserved_minutes, max_seconds, created_at)
    values (${r.call_id}, ${r.organization_id}, ${r.publishable_key_id}, ${r.plan_charged}, ${r.month},
            ${r.reserved_minutes}, ${r.max_seconds}, ${r.created_at})`;
}

/** The `max_seconds` of a call's reservation, or null when it has none. */
export async function reservationMaxSeconds(sql: Db, callId: string): Promise<number | null> {
  const [row] = await sql<{ max_seconds: number }[]>`
    select max_seconds from minute_reservations where call_id = ${callId}`;
  return row?.max_seconds ?? null;
}

/** What a settlement settled: enough for the key's rows (a web call with a publishable key). */
export interface SettledReservation {
  publishable_key_id: string | null;
  /** `YYYY-MM-01`. */
  month: string;
  reserved_minutes: number;
  kept_minutes: number;
  /** When the reservation was made (the day the key's abuse view counted it). */
  created_at: Date;
}

/**
 * Settles a call's open reservation in one statement: `keepMinutes` (at most what was reserved) stay
 * counted; the rest goes back to the plan, pending on the reservation until the plan's row is next
 * locked (`lockUsage`): an end never waits for that row, which every placement locks.
 * Returns what was settled, for the key's row (web calls with a publishable key); null when there was
 * no open reservation (never reserved, or settled already: the reservation's row lock orders
 * concurrent settlements, and only the first finds it open). The settlements of the jobs of a shared
 * transaction go in one statement (engine/gathered.ts).
 */
export async function settleOpenReservation(
  tx: Db,
  callId: string,
  keepMinutes: number,
  at: Date,
): Promise<SettledReservation | null> {
  const [row] = await gathered(
    tx,
    "reservation settlements",
    [{ callId, keepMinutes, at }],
    settleReservations,
  );
  return row ?? null;
}

interface Settling {
  callId: string;
  keepMinutes: number;
  at: Date;
}

async function settleReservations(tx: Db, items: Settling[]): Promise<(SettledReservation | null)[]> {
  // A call twice (which the jobs' keys keep apart) is settled once, by the first: each in its turn.
  if (items.length === 1 || new Set(items.map((i) => i.callId)).size < items.length) {
    const rows: (SettledReservation | null)[] = [];
    for (const i of items) {
      const [row] = await tx<SettledReservation[]>`
        update minute_reservations set kept_minutes = least(reserved_minutes, ${i.keepMinutes}::integer),
          settled_at = ${i.at},
          plan_return_pending = plan_charged and reserved_minutes > ${i.keepMinutes}::integer
        where call_id = ${i.callId} and settled_at is null
        returning publishable_key_id, to_char(month, 'YYYY-MM-DD') as month, reserved_minutes, kept_minutes,
          created_at`;
      rows.push(row ?? null);
    }
    return rows;
  }
  // From `batch_rows` (sql/0012): its plan looks each reservation up by key, whatever the table's size.
  const settled = await tx<(SettledReservation & { call_id: string })[]>`
    update minute_reservations r set kept_minutes = least(r.reserved_minutes, v.keep),
      settled_at = v.at,
      plan_return_pending = r.plan_charged and r.reserved_minutes > v.keep
    from batch_rows(${tx.json(items.map((i) => ({ call_id: i.callId, keep: i.keepMinutes, at: i.at.toISOString() })) as never)}::json) e
      cross join lateral json_to_record(e) as v(call_id text, keep integer, at timestamptz)
    where r.call_id = v.call_id and r.settled_at is null
    returning r.call_id, r.publishable_key_id, to_char(r.month, 'YYYY-MM-DD') as month, r.reserved_minutes,
      r.kept_minutes, r.created_at`;
  const byCall = new Map(settled.map(({ call_id, ...row }) => [call_id, row]));
  return items.map((i) => byCall.get(i.callId) ?? null);
}

/**
 * Whether the organization has calls in progress holding reserved minutes: all but what those calls use
 * come back when they end (the index of open reservations, sql/0030, finds them).
 */
export async function hasOpenReservations(sql: Db, organizationId: string): Promise<boolean> {
  const [row] = await sql<{ open: boolean }[]>`
    select exists(
      select 1 from minute_reservations r join calls c on c.id = r.call_id
      where r.organization_id = ${organizationId} and r.settled_at is null
        and c.status in ('initiated', 'ringing', 'ongoing')) as open`;
  return row!.open;
}
