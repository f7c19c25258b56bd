import type { Fragment } from "postgres";
import { CALL_COLUMNS, type CallRow, columnList } from "./calls.ts";
import type { Db } from "./engine/connection.ts";
import { gathered } from "./engine/gathered.ts";
import { nextUpdatedAt } from "./engine/updatedAt.ts";

/**
 * The statements that move a live phone call through the carrier's path: dialled (`ringing`), answered
 * (`ongoing`), hung up while its answer was still being written, completed. Each is fenced on the
 * status it expects; those a shared transaction's jobs send together go in one statement
 * (engine/gathered.ts).
 */

/** What dialling a live phone call needs, read as it moves to `ringing`. */
export interface DialRow {
  id: string;
  organization_id: string;
  to_number: string;
  variables: Record<string, unknown>;
  agent_id: string;
  livekit_agent_name: string | null;
  /** The organization's own carrier settings (null: the environment's). */
  sip_trunk_id: string | null;
  caller_number: string | null;
  /** From the call's reservation; null when the call has none (it must not be dialled). */
  max_seconds: number | null;
}

/**
 * `initiated` → `ringing` at `now` for the live phone calls of `ids` that are still `initiated`, in one
 * statement, returning what their dials need (the agent, the organization's carrier settings, the
 * reservation's `maxSeconds`). A call that moved already (a repeated timer) is not returned. Every
 * call moved is returned, one without a reservation too (`max_seconds` null), so that none is left
 * ringing unseen.
 */
export function ringPhoneCalls(sql: Db, ids: readonly string[], now: Date): Promise<DialRow[]> {
  return sql<DialRow[]>`
    with moved as (
      update calls set status = 'ringing', updated_at = ${nextUpdatedAt(sql, now)}
      where id = any(${ids as string[]}::text[]) and status = 'initiated' and livemode and direction = 'outbound'
      returning id, organization_id, to_number, variables, agent_id
    )
    select m.id, m.organization_id, m.to_number, m.variables, m.agent_id, a.livekit_agent_name,
      o.sip_trunk_id, o.caller_number, r.max_seconds
    from moved m
      join agents a on a.id = m.agent_id
      join organizations o on o.id = m.organization_id
      left join minute_reservations r on r.call_id = m.id`;
}

/**
 * A live call still `ongoing` → `completed` at `at` (as reported), changed at `now` (the service's
 * clock), in one statement: `endedAt` the later of `at` and `startedAt` (never before it), and never
 * more than the call's `maxSeconds` after it (the server ends a call then: a later report is LiveKit's
 * room closing behind it); `durationSeconds` the whole seconds between them. `results_reported`: its
 * voice agent reported its results before this end (the row is locked by this update until the
 * transaction ends, so a report still under way comes after it). Null when the call was not ongoing.
 * The completions of the jobs of a shared transaction go in one statement (engine/gathered.ts).
 */
export async function completeLiveCall(
  sql: Db,
  id: string,
  at: Date,
  now: Date,
): Promise<CompletedCallRow | null> {
  const [row] = await gathered(sql, "live call completions", [{ id, at, now }], completeLiveCalls);
  return row ?? null;
}

type CompletedCallRow = CallRow & { results_reported: boolean };

/** `completeLiveCall` for several calls (each at most once) in one statement: each one's row, or null. */
async function completeLiveCalls(sql: Db, calls: CallMove[]): Promise<(CompletedCallRow | null)[]> {
  const moved = await sql<CompletedCallRow[]>`
    update calls c set status = 'completed', ended_at = e.at,
      duration_seconds = round(extract(epoch from e.at - c.started_at))::integer,
      updated_at = ${nextUpdatedAt(sql, sql`e.now`, "c")}
    from (
      select k.id, v.now,
        least(greatest(v.at, k.started_at), k.started_at + make_interval(secs => r.max_seconds)) as at
      from ${callMoves(sql, calls)} join calls k on k.id = v.id
        left join minute_reservations r on r.call_id = k.id
    ) e
    where c.id = e.id and c.status = 'ongoing' and c.livemode and c.started_at is not null
    returning ${columnList(sql, CALL_COLUMNS, "c")}, c.results_reported_at is not null as results_reported`;
  return rowsOf(calls, moved);
}

/** A call to move, at `at` (as reported), changed at `now` (the service's clock). */
interface CallMove {
  id: string;
  at: Date;
  now: Date;
}

/**
 * The moves as a relation `v (id, at, now)`: one row alone, else `batch_rows` of them (sql/0012: its
 * plan looks each call up by key, whatever the table's size). A call named twice would be moved once:
 * the callers' keys keep a call to one job of a shared transaction.
 */
function callMoves(sql: Db, calls: readonly CallMove[]): Fragment {
  if (calls.length === 1) {
    const c = calls[0]!;
    return sql`(select ${c.id}::text as id, ${c.at}::timestamptz as at, ${c.now}::timestamptz as now) v`;
  }
  const rows = calls.map((c) => ({ id: c.id, at: c.at.toISOString(), now: c.now.toISOString() }));
  return sql`batch_rows(${sql.json(rows as never)}::json) e
    cross join lateral json_to_record(e) as v(id text, at timestamptz, now timestamptz)`;
}

/** The rows a statement moved, as each move's row or null (not in the status it was fenced on). */
function rowsOf<R extends { id: string }>(calls: readonly CallMove[], rows: readonly R[]): (R | null)[] {
  const byId = new Map(rows.map((r) => [r.id, r]));
  return calls.map((c) => byId.get(c.id) ?? null);
}

/**
 * An end LiveKit reported for a phone call still `ringing` (its callee answered and hung up before the
 * answer was written): kept, the earliest one, for the answer to apply. False when the call is not
 * ringing (any more). The engine's own bookkeeping, not part of the call object (which stays `ringing`
 * until the answer applies it), so its `updated_at` stays.
 */
export async function noteHangUpWhileRinging(sql: Db, id: string, at: Date): Promise<boolean> {
  const rows = await sql`
    update calls set hung_up_while_ringing_at = least(hung_up_while_ringing_at, ${at}::timestamptz)
    where id = ${id} and status = 'ringing' and livemode and direction = 'outbound'
    returning id`;
  return rows.length > 0;
}

/**
 * A phone call's callee answered at `at`: `ringing` → `ongoing` with `startedAt`, changed at `now` (the
 * service's clock), returning the call and the end LiveKit reported while it still rang, if any (see
 * `noteHangUpWhileRinging`). Null when it was not ringing. The answers of the jobs of a shared
 * transaction go in one statement (engine/gathered.ts).
 */
export async function answerPhoneCall(
  sql: Db,
  id: string,
  at: Date,
  now: Date,
): Promise<AnsweredCallRow | null> {
  const [row] = await gathered(sql, "phone call answers", [{ id, at, now }], async (tx, calls) => {
    const moved = await tx<AnsweredCallRow[]>`
      update calls c set status = 'ongoing', started_at = greatest(v.at, c.created_at),
        updated_at = ${nextUpdatedAt(tx, tx`v.now`, "c")}
      from ${callMoves(tx, calls)}
      where c.id = v.id and c.status = 'ringing' and c.livemode and c.direction = 'outbound'
      returning ${columnList(tx, CALL_COLUMNS, "c")}, c.hung_up_while_ringing_at`;
    return rowsOf(calls, moved);
  });
  return row ?? null;
}

type AnsweredCallRow = CallRow & { hung_up_while_ringing_at: Date | null };
