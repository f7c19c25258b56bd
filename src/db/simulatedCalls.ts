import type { Fragment } from "postgres";
import type { Logger } from "../log.ts";
import type { TranscriptSegment } from "../simulation/content.ts";
import { CALL_COLUMNS, type CallRow, columnList, insertCallsFrom } from "./calls.ts";
import { Coalescer, logRefusedBatch, STATEMENT_COALESCING } from "./engine/coalesce.ts";
import { type Db, refusedByDatabase } from "./engine/connection.ts";
import { nextUpdatedAt } from "./engine/updatedAt.ts";
import type { InsertedTimerRow } from "./timers.ts";

/**
 * Statements of the calls table for simulated calls (test keys): created with the timer of their
 * first step in one statement, and moved a batch of steps per statement, each step fenced by the
 * status it expects.
 */

// ——— simulated calls, a batch of steps per statement ———

/**
 * `initiated` → `ringing` at `now` for the calls of `steps`, and in the same statement what `then`
 * builds from the calls that moved (the relation `moved(id, due)`, `due` being their step's due time):
 * the body of a `with` entry, such as the insert of their next timers. Returns the rows of that entry.
 */
export async function ringCalls<T>(
  sql: Db,
  steps: readonly { id: string; due: Date }[],
  now: Date,
  then: (moved: Fragment) => Fragment,
): Promise<T[]> {
  const [row] = await sql<{ rows: T[] }[]>`
    with moved as (
      update calls c set status = 'ringing', updated_at = ${nextUpdatedAt(sql, now)}
      from unnest(${steps.map((s) => s.id)}::text[], ${steps.map((s) => s.due.toISOString())}::timestamptz[])
        as v(id, due)
      where c.id = v.id and c.status = 'initiated'
      returning c.id, v.due
    ), next as (${then(sql`moved`)})
    select coalesce((select json_agg(next) from next), '[]'::json) as rows`;
  return row!.rows;
}

/** `ringing` → `ongoing` at `now` with `startedAt`; returns the calls that moved. */
export async function startCalls(
  sql: Db,
  steps: readonly { id: string; at: Date }[],
  now: Date,
): Promise<CallRow[]> {
  return sql<CallRow[]>`
    update calls set status = 'ongoing', started_at = v.at, updated_at = ${nextUpdatedAt(sql, now)}
    from unnest(${steps.map((s) => s.id)}::text[], ${steps.map((s) => s.at.toISOString())}::timestamptz[]) as v(vid, at)
    where calls.id = v.vid and calls.status = 'ringing'
    returning ${columnList(sql, CALL_COLUMNS, "calls")}`;
}

export async function readOngoingCalls(sql: Db, ids: readonly string[]): Promise<CallRow[]> {
  return sql<CallRow[]>`
    select ${columnList(sql, CALL_COLUMNS)} from calls where id = any(${ids as string[]}::text[]) and status = 'ongoing'`;
}

/**
 * `ongoing` → `completed` at `now` with the simulated outcome; returns the calls that moved. A simulated
 * call ends and has its results ready in this one statement: two changes, each with its own time. The
 * end's is `ended_updated_at` (what `call.ended` carries); the results', a millisecond later, is the
 * row's `updated_at` (what the transcript and the analysis carry).
 */
export async function completeCalls(
  sql: Db,
  now: Date,
  done: readonly {
    id: string;
    endedAt: Date;
    durationSeconds: number;
    summary: string;
    collectedData: Record<string, unknown>;
    transcript: TranscriptSegment[];
  }[],
): Promise<(CallRow & { ended_updated_at: Date })[]> {
  // One JSON parameter (as events.ts says why): a transcript as text in a text[] had every quote of its
  // JSON escaped by the driver and unescaped again by PostgreSQL.
  const rows = done.map((d) => ({
    vid: d.id,
    ended_at: d.endedAt.toISOString(),
    duration: d.durationSeconds,
    summary: d.summary,
    collected: d.collectedData,
    transcript: d.transcript,
  }));
  return sql<(CallRow & { ended_updated_at: Date })[]>`
    update calls set
      status = 'completed',
      ended_at = v.ended_at,
      duration_seconds = v.duration,
      summary = v.summary,
      collected_data = v.collected,
      transcript = v.transcript,
      successful = true,
      outcome = 'answered_human',
      updated_at = ${nextUpdatedAt(sql, now)} + interval '1 millisecond'
    from batch_rows(${sql.json(rows as never)}::json) e
      cross join lateral json_to_record(e) as v(vid text, ended_at timestamptz, duration integer, summary text,
        collected jsonb, transcript jsonb)
    where calls.id = v.vid and calls.status = 'ongoing'
    returning ${columnList(sql, CALL_COLUMNS, "calls")},
      calls.updated_at - interval '1 millisecond' as ended_updated_at`;
}

// ——— simulated calls created in one statement with their first timer ———

/** A timer to insert, as `TimerScheduler.insertFrom` takes it: the body of a `with` entry from `rows`. */
export type TimerInsert = (sql: Db, rows: Fragment) => Fragment;

/**
 * The body of a `with` entry inserting simulated calls (`livemode` false, `initiated`, no task) from
 * `calls`, a select of `(id, organization_id, agent_id, to_number, contact_id, campaign_id, direction,
 * variables, simulated_duration_seconds, language, created_at)`.
 */
export function insertSimulatedCallsFrom(sql: Db, calls: Fragment): Fragment {
  return insertCallsFrom(
    sql,
    sql`
      select c.id, c.organization_id, false as livemode, 'initiated' as status, c.agent_id, c.to_number,
        c.contact_id, c.campaign_id, c.direction, c.variables, c.simulated_duration_seconds, c.language,
        null as task_id, c.created_at
      from (${calls}) c`,
  );
}

/** The rows of the first step's timer of each call of `created` (a relation with `id`), due after `delayMs`. */
export function firstStepTimers(sql: Db, kind: string, created: Fragment, delayMs: number): Fragment {
  return sql`
    select ${kind}::text as kind, now() + ${delayMs}::float8 * interval '1 millisecond' as due_at,
      jsonb_build_object('callId', id, 'to', 'ringing') as payload
    from ${created}`;
}

/** A simulated call to create, with the columns a statement of `insertSimulatedCallsFrom` takes. */
export interface NewSimulatedCall {
  id: string;
  organizationId: string;
  agentId: string;
  to: string | null;
  contactId: string | null;
  campaignId: string | null;
  direction: "outbound" | "web";
  variables: Record<string, unknown>;
  durationSeconds: number;
  /** The call's language, or null for the agent's (read in the same statement). */
  language: string | null;
  createdAt: Date;
}

/**
 * One simulated call and the timer of its first step, in one statement. The call is written only if
 * its agent is the organization's (active too, with `onlyIf.activeAgent`) and, with
 * `onlyIf.contactExists`, if its contact is the organization's: otherwise nothing is written and null
 * is returned, so a caller can try first and find out why only when nothing was written. The timer
 * goes through `timer.insert` (the scheduler's `insertFrom`). Returns the call and the timer rows (for
 * the scheduler's `scheduled`).
 */
export async function insertSimulatedCall<T>(
  sql: Db,
  c: NewSimulatedCall,
  timer: { kind: string; delayMs: number; insert: TimerInsert },
  onlyIf: { activeAgent?: boolean; contactExists?: boolean } = {},
): Promise<{ call: CallRow; timers: T[] } | null> {
  const call = sql`
    select ${c.id}::text as id, a.organization_id, a.id as agent_id,
      ${c.to}::text as to_number, ${c.contactId}::text as contact_id, ${c.campaignId}::text as campaign_id,
      ${c.direction}::text as direction, ${sql.json(c.variables as never)}::jsonb as variables,
      ${c.durationSeconds}::integer as simulated_duration_seconds,
      coalesce(${c.language}::text, a.content_language) as language, ${c.createdAt}::timestamptz as created_at
    from agents a
    where a.id = ${c.agentId} and a.organization_id = ${c.organizationId}
      ${onlyIf.activeAgent ? sql`and a.active` : sql``}
      ${
        onlyIf.contactExists
          ? sql`and exists (select from contacts k where k.id = ${c.contactId} and k.organization_id = a.organization_id)`
          : sql``
      }`;
  const [row] = await sql<(CallRow & { timers: T[] })[]>`
    with created_call as (${insertSimulatedCallsFrom(sql, call)}),
      created_timer as (${timer.insert(sql, firstStepTimers(sql, timer.kind, sql`created_call`, timer.delayMs))})
    select created_call.*, (select json_agg(created_timer) from created_timer) as timers from created_call`;
  if (!row) return null;
  const { timers, ...rest } = row;
  return { call: rest as CallRow, timers };
}

/**
 * Several `insertSimulatedCall`s with `onlyIf` `{ activeAgent, contactExists }` in one statement (the
 * test keys' `POST /v1/calls`, coalesced): each call is written only if its agent is the
 * organization's and active and its contact, when it names one, the organization's. Answers in the
 * order of `cs`: the call and its timer rows, or null where nothing was written.
 */
export async function insertSimulatedCalls<T>(
  sql: Db,
  cs: readonly NewSimulatedCall[],
  timer: { kind: string; delayMs: number; insert: TimerInsert },
): Promise<({ call: CallRow; timers: T[] } | null)[]> {
  const input = cs.map((c) => ({
    id: c.id,
    organization_id: c.organizationId,
    agent_id: c.agentId,
    to_number: c.to,
    contact_id: c.contactId,
    campaign_id: c.campaignId,
    direction: c.direction,
    variables: c.variables,
    duration: c.durationSeconds,
    language: c.language,
    created_at: c.createdAt.toISOString(),
  }));
  const rows = await sql<(CallRow & { timers: T[] })[]>`
    with input as (
        select r.* from batch_rows(${sql.json(input as never)}::json) e
          cross join lateral json_to_record(e) as r(id text, organization_id text, agent_id text,
            to_number text, contact_id text, campaign_id text, direction text, variables jsonb,
            duration integer, language text, created_at timestamptz)
      ),
      created_call as (${insertSimulatedCallsFrom(
        sql,
        sql`
          select r.id, a.organization_id, a.id as agent_id, r.to_number, r.contact_id, r.campaign_id,
            r.direction, r.variables, r.duration as simulated_duration_seconds,
            coalesce(r.language, a.content_language) as language, r.created_at
          from input r join agents a on a.id = r.agent_id and a.organization_id = r.organization_id and a.active
          where r.contact_id is null
            or exists (select from contacts k where k.id = r.contact_id and k.organization_id = a.organization_id)`,
      )}),
      created_timer as (${timer.insert(sql, firstStepTimers(sql, timer.kind, sql`created_call`, timer.delayMs))})
    select c.*, (select json_agg(t) from created_timer t where t.payload->>'callId' = c.id) as timers
    from created_call c`;
  const written = new Map(rows.map(({ timers, ...call }) => [call.id, { call: call as CallRow, timers }]));
  return cs.map((c) => written.get(c.id) ?? null);
}

/**
 * The rows of the next step's timer of each call of `moved` (a relation with `id` and `due`, the due
 * time of the step that moved it), due `delayMs` after that: `to` names the step.
 */
export function nextStepTimers(
  sql: Db,
  kind: string,
  moved: Fragment,
  delayMs: number,
  to: string,
): Fragment {
  return sql`
    select ${kind}::text as kind, due + ${delayMs}::float8 * interval '1 millisecond' as due_at,
      jsonb_build_object('callId', id, 'to', ${to}::text) as payload
    from ${moved}`;
}

/** Test keys' calls created together share one statement (engine/coalesce.ts). */
export type SimulatedCallInserts<T = InsertedTimerRow> = Coalescer<
  NewSimulatedCall,
  { call: CallRow; timers: T[] } | null
>;

export function simulatedCallInserts<T>(
  sql: Db,
  log: Logger,
  timer: { kind: string; delayMs: number; insert: TimerInsert },
): SimulatedCallInserts<T> {
  return new Coalescer(
    (c) => insertSimulatedCall<T>(sql, c, timer, { activeAgent: true, contactExists: c.contactId !== null }),
    (cs) => insertSimulatedCalls<T>(sql, cs, timer),
    { ...STATEMENT_COALESCING, refusedByDatabase, onRefused: logRefusedBatch(log, "simulated call inserts") },
  );
}
