import type { Fragment, MaybeRow, PendingQuery, RowList } from "postgres";
import { callLoadSql, inProgressSql, lockCallLimits } from "./callAdmission.ts";
import { CALL_COLUMNS, type CallRow, columnList, NEW_CALL_COLUMNS } from "./calls.ts";
import { type Db, settledAll } from "./engine/connection.ts";
import { nextUpdatedAt } from "./engine/updatedAt.ts";
import { lockPlanUsagesSql, planUsedSql } from "./minutes.ts";

/**
 * The statements that place live phone calls (services/placement.ts): the organizations' locks, then
 * one statement that reads what the limits need under them, decides every call of the batch, and
 * writes the calls placed, all sent at once with the commit behind: a placement is one round trip,
 * and its organizations' locks are held for the statements' own time, never across a round trip.
 */

/**
 * A live phone call to decide: a new one, or (`scheduled`) the `scheduled` call of a task whose time
 * has come, which moves to `initiated` instead of being created.
 */
export interface PhoneCallCandidate {
  callId: string;
  organizationId: string;
  /** The organization and agent as the caller's checks read them (their row versions): null, unknown. */
  organizationVersion: string | null;
  agentId: string;
  agentVersion: string | null;
  /** As stored on the call. */
  to: string;
  /** Its one spelling, as the do-not-call list keeps numbers. */
  canonicalTo: string;
  contactId: string | null;
  /** Whether the contact must be the organization's (false: it was checked when the call was asked for). */
  checkContact: boolean;
  campaignId: string | null;
  variables: Record<string, unknown>;
  scheduled: boolean;
  /** A check made before this statement refused it: it is only looked at, never placed. */
  refused: boolean;
}

/** What the statement found for one candidate, in the order given. */
export interface PhoneCallDecision {
  /** The organization or the agent changed since the caller read them (or it never had): look again. */
  stale: boolean;
  agentMissing: boolean;
  contactMissing: boolean;
  blocked: boolean;
  /** A task's call that is no longer `scheduled` (it was cancelled meanwhile). */
  notScheduled: boolean;
  /**
   * The organization as this candidate found it, after the calls placed before it in the batch: plan
   * minutes left, calls in progress, calls of the rolling hour and the hour's oldest placement.
   */
  planRemaining: number;
  inProgress: number;
  inHour: number;
  oldest: Date | null;
  /** The current rows with their versions, for the caller's next look (a stale candidate only). */
  organization: VersionedJson | null;
  agent: VersionedJson | null;
  /** The call placed; null when it was not placed. */
  call: CallRow | null;
}

/** The decisions, in the order of the candidates, and the dial timers of the calls placed. */
export interface PhoneCallDecisions<T> {
  decisions: PhoneCallDecision[];
  timers: T[];
}

export interface PlacementInput {
  candidates: readonly PhoneCallCandidate[];
  now: Date;
  hourAgo: Date;
  /** The month of the plan's usage (`YYYY-MM-01`). */
  month: string;
  /** The longest a phone call may last, whatever remains of the plan (seconds). */
  longestSeconds: number;
  /** The dial timer written for each call placed (the scheduler's `insertFrom`). */
  timer: { kind: string; insert: (sql: Db, rows: Fragment) => Fragment };
}

/**
 * Takes the organizations' locks (every limits row, then every plan usage row, each in the order of the
 * ids, as every placement takes them, so two never deadlock) and decides every candidate in one
 * statement sent right behind them; `send` sends that statement (a transaction's `end.last`, so the
 * commit goes with it). The locks are statements of their own because a statement's snapshot is taken
 * when it starts: the decision, started after the locks were granted, sees every placement committed
 * before, which a lock taken within it would not.
 *
 * How the statement decides, organization by organization, in the order of the candidates: a
 * candidate is eligible unless something already refuses it (stale, refused before, agent or
 * contact missing, number blocked, a task's call no longer scheduled). Each call placed takes a place
 * among the calls in progress, a place in the rolling hour (unless placed at or before the hour's cut,
 * where it never counts) and min(60, what remains) plan minutes. So the calls placed are the first `n`
 * eligible candidates, `n` the fewest places left by the plan's minutes, the calls in progress and
 * the hour; and every candidate sees the organization as the `min(k, n)` calls placed before it
 * left it, `k` the eligible candidates before it. That closed form is what the former one-by-one
 * checks computed, call after call.
 */
export async function placePhoneCalls<T>(
  tx: Db,
  input: PlacementInput,
  send: <R extends readonly MaybeRow[]>(statement: PendingQuery<R>) => Promise<RowList<R>> = (q) => q,
): Promise<PhoneCallDecisions<T>> {
  const organizationIds = [...new Set(input.candidates.map((c) => c.organizationId))].sort();
  // Started here, in this order, before the decision is sent: a statement starts only once awaited
  // or executed, and one awaited through `Promise.all` starts a few microtasks later than one executed
  // (`end.last` executes its statement at once).
  const locks = [
    ...lockCallLimits(tx, organizationIds, input.hourAgo),
    ...lockPlanUsagesSql(tx, organizationIds, input.month),
  ].map((statement) => statement.execute());
  const decided = send(decideSql<T>(tx, input));
  const [rows] = await settledAll([decided, ...locks] as const);
  const calls = new Map(
    (rows[0]?.p_calls ?? []).map((json) => [json.id as string, rowFromJson<CallRow>(json, CALL_DATES)]),
  );
  const decisions = rows.map((r, i) => ({
    stale: r.p_stale,
    agentMissing: r.p_agent_missing,
    contactMissing: r.p_contact_missing,
    blocked: r.p_blocked,
    notScheduled: r.p_not_scheduled,
    planRemaining: r.p_plan_remaining,
    inProgress: r.p_in_progress,
    inHour: r.p_in_hour,
    oldest: r.p_oldest,
    organization: r.p_organization,
    agent: r.p_agent,
    call: calls.get(input.candidates[i]!.callId) ?? null,
  }));
  return { decisions, timers: rows[0]?.p_timers ?? [] };
}

/** A row as JSON (its timestamps as text) and its version. */
export interface VersionedJson {
  row: Record<string, unknown>;
  version: string;
}

/**
 * A row as `row_to_json` / `json_agg` return it, its timestamp columns `dates` (text there) made
 * `Date`s again: a call placed, an organization or an agent sent back for a second look.
 */
export function rowFromJson<T>(json: Record<string, unknown>, dates: readonly string[]): T {
  const row: Record<string, unknown> = { ...json };
  for (const column of dates) {
    const v = json[column];
    row[column] = v === null || v === undefined ? null : new Date(v as string);
  }
  return row as T;
}

const CALL_DATES = ["created_at", "updated_at", "started_at", "ended_at"] as const;

interface DecisionRow<T> {
  p_stale: boolean;
  p_agent_missing: boolean;
  p_contact_missing: boolean;
  p_blocked: boolean;
  p_not_scheduled: boolean;
  p_plan_remaining: number;
  p_in_progress: number;
  p_in_hour: number;
  p_oldest: Date | null;
  p_organization: VersionedJson | null;
  p_agent: VersionedJson | null;
  p_calls: Record<string, unknown>[] | null;
  p_timers: T[] | null;
}

const INT_MAX = 2_147_483_647;

/** The statement of `placePhoneCalls` (also explained by the plan tests). */
export function decideSql<T>(sql: Db, input: PlacementInput) {
  const { now, hourAgo, month, longestSeconds } = input;
  // The most minutes one call reserves: what `longestSeconds` takes, in whole minutes.
  const perCall = Math.ceil(longestSeconds / 60);
  const candidates = input.candidates.map((c, i) => ({
    i,
    call_id: c.callId,
    organization_id: c.organizationId,
    organization_version: c.organizationVersion,
    agent_id: c.agentId,
    agent_version: c.agentVersion,
    to_number: c.to,
    canonical_to: c.canonicalTo,
    contact_id: c.contactId,
    check_contact: c.checkContact,
    campaign_id: c.campaignId,
    variables: c.variables,
    scheduled: c.scheduled,
    refused: c.refused,
  }));
  const at = sql`${now}::timestamptz`;
  return sql<DecisionRow<T>[]>`
    with input as (
        select r.* from batch_rows(${sql.json(candidates as never)}::json) e
          cross join lateral json_to_record(e) as r(i integer, call_id text, organization_id text,
            organization_version text, agent_id text, agent_version text, to_number text, canonical_to text,
            contact_id text, check_contact boolean, campaign_id text, variables jsonb, scheduled boolean,
            refused boolean)
      ),
      -- The organizations from the candidates, not from a parameter of their own: an array parameter
      -- is planned for ten elements in a generic plan, which then never looked as cheap as the custom
      -- plans of one, and every execution was planned again (3 ms each).
      load as (${callLoadSql(sql, sql`select distinct organization_id from input`, hourAgo)}),
      -- The calls in progress: the limits row's bound while it leaves room for every candidate of the
      -- batch (any of them may be placed on it), else counted (a count of every call in progress, and of
      -- the index entries of those that ended since the last vacuum, at each batch of each organization).
      organization as (
        select o.id as organization_id, o.xmin::text as version, o.max_concurrent_calls, o.max_calls_per_hour,
          o.plan_minutes - ${planUsedSql(sql, sql`o.id`, month)} as remaining,
          greatest(l.hour_cut, ${hourAgo}::timestamptz) as cut,
          l.hour_count - l.left as in_hour, l.oldest,
          case when l.in_progress_bound + (select count(*) from input i where i.organization_id = o.id)
              <= o.max_concurrent_calls
            then l.in_progress_bound else ${inProgressSql(sql, sql`o.id`)} end as in_progress,
          (${at} > greatest(l.hour_cut, ${hourAgo}::timestamptz))::int as counts_in_hour
        from organizations o join load l on l.organization_id = o.id
      ),
      -- Materialized: its subqueries (the contact, the do-not-call list) run once per candidate, not once
      -- per later use of their columns.
      request as materialized (
        select i.i, i.call_id, i.organization_id, i.agent_id, i.to_number, i.contact_id, i.campaign_id, i.variables,
          i.scheduled, s.remaining, s.in_progress, s.in_hour, s.oldest, s.counts_in_hour,
          a.content_language,
          a.id is null as agent_missing,
          i.organization_version is distinct from s.version
            or (a.id is not null and i.agent_version is distinct from a.xmin::text) as stale,
          i.refused,
          i.check_contact and i.contact_id is not null and not exists(
            select 1 from contacts k where k.id = i.contact_id and k.organization_id = i.organization_id)
            as contact_missing,
          exists(select 1 from blocked_numbers b
            where b.organization_id = i.organization_id and b.livemode and b.phone = i.canonical_to) as blocked,
          i.scheduled and not exists(select 1 from calls c where c.id = i.call_id and c.status = 'scheduled')
            as not_scheduled
        from input i
          join organization s on s.organization_id = i.organization_id
          left join agents a on a.id = i.agent_id and a.organization_id = i.organization_id
      ),
      ranked as (
        select r.*, eligible,
          count(*) filter (where eligible) over (partition by r.organization_id order by r.i) - eligible::int as k
        from request r,
          lateral (select not (r.stale or r.refused or r.agent_missing or r.contact_missing or r.blocked
            or r.not_scheduled) as eligible) e
      ),
      capacity as (
        select organization_id, greatest(0, least(
          -- In bigint: a plan may hold up to 2^31 - 1 minutes, and seconds of it overflow an integer.
          case when remaining > 0 then ((remaining::bigint + ${perCall} - 1) / ${perCall})::int else 0 end,
          max_concurrent_calls - in_progress,
          case when counts_in_hour = 1 then max_calls_per_hour - in_hour
            when in_hour >= max_calls_per_hour then 0 else ${INT_MAX} end)) as n
        from organization
      ),
      decided as (
        select r.*, least(r.k, c.n)::int as before, r.eligible and r.k < c.n as placed,
          least(${longestSeconds}, (r.remaining - ${perCall} * least(r.k, c.n)::int)::bigint * 60)::int as max_seconds
        from ranked r join capacity c on c.organization_id = r.organization_id
      ),
      placed as (select * from decided where placed),
      created_call as (
        insert into calls (${columnList(sql, NEW_CALL_COLUMNS)}, updated_at, placed_at)
        select p.call_id, p.organization_id, true, 'initiated', p.agent_id, p.to_number, p.contact_id,
          p.campaign_id, 'outbound', p.variables, null, p.content_language, null, ${at}, ${at}, ${at}
        from placed p where not p.scheduled
        returning ${columnList(sql, CALL_COLUMNS)}
      ),
      -- By key from an array, whatever is planned for the placed rows: a join to it was planned as a scan of
      -- every call for the scheduled ones (seen on a table never analyzed).
      moved_call as (
        update calls set status = 'initiated', placed_at = ${at}, updated_at = ${nextUpdatedAt(sql, now, "calls")}
        where calls.id = any(array(select call_id from placed where scheduled)) and calls.status = 'scheduled'
        returning ${columnList(sql, CALL_COLUMNS, "calls")}
      ),
      created_reservation as (
        insert into minute_reservations
          (call_id, organization_id, publishable_key_id, plan_charged, month, reserved_minutes, max_seconds, created_at)
        select call_id, organization_id, null, true, ${month}::date, (max_seconds + 59) / 60, max_seconds, ${at}
        from placed
      ),
      created_timer as (${input.timer.insert(
        sql,
        sql`select ${input.timer.kind}::text as kind, now() as due_at, jsonb_build_object('callId', call_id) as payload
          from placed`,
      )}),
      per_organization as (
        select organization_id, count(*)::int as n from placed group by organization_id
      ),
      -- Every organization of the batch: its bound, with the calls placed; its hour, when any was.
      counted_limits as (
        update call_limits l set in_progress_bound = s.in_progress + coalesce(p.n, 0),
          hour_cut = case when p.n > 0 then s.cut else l.hour_cut end,
          hour_count = case when p.n > 0 then s.in_hour + s.counts_in_hour * p.n else l.hour_count end
        from organization s left join per_organization p on p.organization_id = s.organization_id
        where l.organization_id = s.organization_id
      ),
      counted_minutes as (
        update minute_usage u set used_minutes = u.used_minutes + least(p.n * ${perCall}, s.remaining)
        from per_organization p join organization s on s.organization_id = p.organization_id
        where u.kind = 'plan' and u.subject_id = p.organization_id and u.month = ${month}
      )
    select d.stale as p_stale, d.agent_missing as p_agent_missing, d.contact_missing as p_contact_missing,
      d.blocked as p_blocked, d.not_scheduled as p_not_scheduled,
      d.remaining - ${perCall} * d.before as p_plan_remaining,
      d.in_progress + d.before as p_in_progress,
      d.in_hour + d.counts_in_hour * d.before as p_in_hour,
      coalesce(d.oldest, case when d.before > 0 and d.counts_in_hour = 1 then ${at} end) as p_oldest,
      case when d.stale then (select json_build_object('row', row_to_json(o), 'version', o.xmin::text)
        from organizations o where o.id = d.organization_id) end as p_organization,
      case when d.stale then (select json_build_object('row', row_to_json(a), 'version', a.xmin::text)
        from agents a where a.id = d.agent_id and a.organization_id = d.organization_id) end as p_agent,
      -- The calls placed and their dial timers once, with the first candidate: joined to each candidate,
      -- every candidate would scan them all (the planner takes every part of this statement for one row).
      case when d.i = 0 then (select json_agg(c) from (select * from created_call union all select * from moved_call) c)
        end as p_calls,
      case when d.i = 0 then (select json_agg(t) from created_timer t) end as p_timers
    from decided d
    order by d.i`;
}
