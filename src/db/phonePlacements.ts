import type { Fragment, MaybeRow, PendingQuery, RowList } from "postgres";
import type { HourState } from "./callAdmission.ts";
import { CALL_COLUMNS, type CallRow, columnList, NEW_CALL_COLUMNS } from "./calls.ts";
import type { Db } from "./engine/connection.ts";

/** The statement that writes a batch of live phone calls placed together (services/calls.ts). */

/** A live phone call a batch places: the call, `initiated` now, and its reservation of plan minutes. */
export interface PlacedPhoneCall {
  id: string;
  organizationId: string;
  agentId: string;
  to: string;
  contactId: string | null;
  variables: Record<string, unknown>;
  language: string | null;
  /** Created, placed and reserved at. */
  at: Date;
  /** The reservation's month (`YYYY-MM-01`), minutes and the call's longest duration. */
  month: string;
  reservedMinutes: number;
  maxSeconds: number;
}

/**
 * What a batch counts once for each organization whose calls it placed (services/admission.ts,
 * `placementCounts`): the hour as its last placement left it, and the plan minutes the batch reserved.
 */
export interface PlacementCounts {
  organizationId: string;
  hour: HourState;
  /** The month of the plan's usage row (`YYYY-MM-01`) and the minutes to add to it. */
  month: string;
  planMinutes: number;
}

/**
 * A batch's live phone calls in one statement (services/calls.ts, `placeLiveCalls`): each call
 * `initiated`, its reservation of plan minutes and the timer that dials it (through `timer.insert`, the
 * scheduler's `insertFrom`, due now), and each organization's hour and plan usage as `counts` say (the
 * batch holds those rows' locks). Instead of three statements a call: a batch of a dozen calls sent
 * as many statements spent about 6 ms of PostgreSQL's time while it held its organizations' locks. And
 * one statement for every write, so that the batch's commit may go out right behind it (`send`, the
 * transaction's `end.last`): were it never sent, nothing of the batch would be kept but its locks.
 * Returns each call with its timer rows (for the scheduler's `scheduled`), by id.
 */
export async function insertPlacedPhoneCalls<T>(
  sql: Db,
  calls: readonly PlacedPhoneCall[],
  counts: readonly PlacementCounts[],
  timer: { kind: string; insert: (sql: Db, rows: Fragment) => Fragment },
  send: <R extends readonly MaybeRow[]>(statement: PendingQuery<R>) => Promise<RowList<R>> = (q) => q,
): Promise<Map<string, { call: CallRow; timers: T[] }>> {
  const input = calls.map((c) => ({
    id: c.id,
    organization_id: c.organizationId,
    agent_id: c.agentId,
    to_number: c.to,
    contact_id: c.contactId,
    variables: c.variables,
    language: c.language,
    at: c.at.toISOString(),
    month: c.month,
    reserved_minutes: c.reservedMinutes,
    max_seconds: c.maxSeconds,
  }));
  const countsInput = counts.map((c) => ({
    organization_id: c.organizationId,
    hour_cut: c.hour.cut.toISOString(),
    hour_count: c.hour.count,
    month: c.month,
    plan_minutes: c.planMinutes,
  }));
  const rows = await send(sql<(CallRow & { timers: T[] })[]>`
    with input as (
        select r.* from batch_rows(${sql.json(input as never)}::json) e
          cross join lateral json_to_record(e) as r(id text, organization_id text, agent_id text,
            to_number text, contact_id text, variables jsonb, language text, at timestamptz, month date,
            reserved_minutes integer, max_seconds integer)
      ),
      created_call as (
        insert into calls (${columnList(sql, NEW_CALL_COLUMNS)}, updated_at, placed_at)
        select r.id, r.organization_id, true, 'initiated', r.agent_id, r.to_number, r.contact_id, null,
          'outbound', r.variables, null, r.language, null, r.at, r.at, r.at
        from input r
        returning ${columnList(sql, CALL_COLUMNS)}
      ),
      created_reservation as (
        insert into minute_reservations
          (call_id, organization_id, publishable_key_id, plan_charged, month, reserved_minutes, max_seconds, created_at)
        select r.id, r.organization_id, null, true, r.month, r.reserved_minutes, r.max_seconds, r.at from input r
      ),
      created_timer as (${timer.insert(
        sql,
        sql`select ${timer.kind}::text as kind, now() as due_at, jsonb_build_object('callId', id) as payload
          from created_call`,
      )}),
      counted as (
        select r.* from batch_rows(${sql.json(countsInput as never)}::json) e
          cross join lateral json_to_record(e) as r(organization_id text, hour_cut timestamptz,
            hour_count integer, month date, plan_minutes integer)
      ),
      counted_hour as (
        update call_limits l set hour_cut = c.hour_cut, hour_count = c.hour_count
        from counted c where l.organization_id = c.organization_id
      ),
      counted_minutes as (
        update minute_usage u set used_minutes = u.used_minutes + c.plan_minutes
        from counted c
        where c.plan_minutes <> 0 and u.kind = 'plan' and u.subject_id = c.organization_id and u.month = c.month
      )
    select c.*, (select json_agg(t) from created_timer t where t.payload->>'callId' = c.id) as timers
    from created_call c`);
  return new Map(rows.map(({ timers, ...call }) => [call.id, { call: call as CallRow, timers }]));
}
