import type { Fragment } from "postgres";
import type { TranscriptSegment } from "../simulation/content.ts";
import type { Db } from "./engine/connection.ts";
import type { IndexKey, IndexRange, PageInput, PageRequest } from "./engine/pages.ts";
import { nextUpdatedAt } from "./engine/updatedAt.ts";

/** Statements of the calls table. Every state change is fenced by the status it expects. */

export const CALL_STATUSES = [
  "scheduled",
  "initiated",
  "ringing",
  "ongoing",
  "completed",
  "failed",
  "no_answer",
  "busy",
  "cancelled",
] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];

/** The statuses a call ends in. */
export const ENDED_STATUSES = ["completed", "failed", "no_answer", "busy", "cancelled"] as const;

export type CallRow = {
  id: string;
  organization_id: string;
  livemode: boolean;
  status: CallStatus;
  agent_id: string;
  to_number: string | null;
  contact_id: string | null;
  campaign_id: string | null;
  direction: "outbound" | "web";
  variables: Record<string, unknown>;
  simulated_duration_seconds: number | null;
  language: "en" | "fr";
  started_at: Date | null;
  ended_at: Date | null;
  duration_seconds: number | null;
  summary: string | null;
  collected_data: Record<string, unknown> | null;
  successful: boolean | null;
  outcome: string | null;
  recording_url: string | null;
  task_id: string | null;
  created_at: Date;
  /** The row's last change (db/engine/updatedAt.ts); its creation until it changes. */
  updated_at: Date;
};

/** The columns an insert sets (`NewCall`). */
export const NEW_CALL_COLUMNS = [
  "id",
  "organization_id",
  "livemode",
  "status",
  "agent_id",
  "to_number",
  "contact_id",
  "campaign_id",
  "direction",
  "variables",
  "simulated_duration_seconds",
  "language",
  "task_id",
  "created_at",
] as const;

/** Every column but the transcript, which only its own route reads. */
export const CALL_COLUMNS = [
  ...NEW_CALL_COLUMNS,
  "updated_at",
  // Filled in as the call goes on.
  "started_at",
  "ended_at",
  "duration_seconds",
  "summary",
  "collected_data",
  "successful",
  "outcome",
  "recording_url",
] as const;

const columnLists = new Map<string, string>();

/**
 * A fixed list of column names (optionally qualified by `table`) as SQL text. The driver's identifier
 * helper, `sql(columns)`, picks its meaning by searching the text before it with regular expressions
 * on every execution, which was a visible share of the CPU of the hottest statements; these lists are
 * constants of this module, so their text is made once.
 */
export function columnList(sql: Db, columns: readonly string[], table?: string): Fragment {
  const key = `${table ?? ""}:${columns.join(",")}`;
  let text = columnLists.get(key);
  if (text === undefined) {
    text = columns.map((c) => (table ? `${table}.${c}` : c)).join(", ");
    columnLists.set(key, text);
  }
  return sql.unsafe(text);
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The call object of the API; `taskId` only for calls placed by a scheduled task. */
export function callView(r: CallRow) {
  return {
    id: r.id,
    livemode: r.livemode,
    status: r.status,
    agentId: r.agent_id,
    to: r.to_number,
    contactId: r.contact_id,
    campaignId: r.campaign_id,
    direction: r.direction,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
    startedAt: iso(r.started_at),
    endedAt: iso(r.ended_at),
    durationSeconds: r.duration_seconds,
    summary: r.summary,
    collectedData: r.collected_data,
    successful: r.successful,
    outcome: r.outcome,
    recordingUrl: r.recording_url,
    ...(r.task_id ? { taskId: r.task_id } : {}),
  };
}
export type CallView = ReturnType<typeof callView>;

/** The transcript object; `updatedAt` is its call's. */
export function transcriptView(r: {
  id: string;
  livemode: boolean;
  transcript: TranscriptSegment[];
  updated_at: Date;
}) {
  return {
    callId: r.id,
    livemode: r.livemode,
    segments: r.transcript,
    updatedAt: r.updated_at.toISOString(),
  };
}

export type NewCall = Pick<CallRow, (typeof NEW_CALL_COLUMNS)[number]>;

/**
 * One call; `placed_at` for a live phone call entering the carrier path (the hourly limit counts by it).
 * A new call's `updated_at` is its `created_at`, here and in `insertCallsFrom`.
 */
export async function insertCall(sql: Db, c: NewCall & { placed_at?: Date | null }): Promise<CallRow> {
  const [row] = await sql<CallRow[]>`
    insert into calls (${columnList(sql, NEW_CALL_COLUMNS)}, updated_at, placed_at)
    values (${c.id}, ${c.organization_id}, ${c.livemode}, ${c.status}, ${c.agent_id}, ${c.to_number},
      ${c.contact_id}, ${c.campaign_id}, ${c.direction}, ${sql.json(c.variables as never)},
      ${c.simulated_duration_seconds}, ${c.language}, ${c.task_id}, ${c.created_at}, ${c.created_at},
      ${c.placed_at ?? null})
    returning ${columnList(sql, CALL_COLUMNS)}`;
  return row!;
}

/**
 * The body of a `with` entry (or a statement) inserting calls from `rows`, a select with the columns
 * of `NewCall` by name (types are cast here, so a row of parameters works as well as one read from a
 * table). It returns `CALL_COLUMNS`. A service can thus create a call in the statement that decides it
 * may, such as the one spending a session token.
 */
export function insertCallsFrom(sql: Db, rows: Fragment): Fragment {
  return sql`
    insert into calls (${columnList(sql, NEW_CALL_COLUMNS)}, updated_at)
    select r.id::text, r.organization_id::text, r.livemode::boolean, r.status::text, r.agent_id::text,
      r.to_number::text, r.contact_id::text, r.campaign_id::text, r.direction::text, r.variables::jsonb,
      r.simulated_duration_seconds::integer, r.language::text, r.task_id::text, r.created_at::timestamptz,
      r.created_at::timestamptz
    from (${rows}) r
    returning ${columnList(sql, CALL_COLUMNS)}`;
}

/** The calls a key may read: of its organization and mode, and of its agents when it is restricted to some. */
export interface CallScope {
  organizationId: string;
  livemode: boolean;
  agentIds: string[] | null;
}

function readableBy(sql: Db, scope: CallScope): Fragment {
  return sql`organization_id = ${scope.organizationId} and livemode = ${scope.livemode}
    ${scope.agentIds ? sql`and agent_id = any(${scope.agentIds})` : sql``}`;
}

/** One call of the organization in the key's mode (and of the key's agents, if it is restricted). */
export async function findCall(sql: Db, scope: CallScope, id: string): Promise<CallRow | null> {
  const [row] = await sql<CallRow[]>`
    select ${columnList(sql, CALL_COLUMNS)} from calls where id = ${id} and ${readableBy(sql, scope)}`;
  return row ?? null;
}

export interface TranscriptRow {
  id: string;
  livemode: boolean;
  status: CallStatus;
  transcript: TranscriptSegment[] | null;
  updated_at: Date;
}

export async function findTranscript(sql: Db, scope: CallScope, id: string): Promise<TranscriptRow | null> {
  const [row] = await sql<TranscriptRow[]>`
    select id, livemode, status, transcript, updated_at from calls where id = ${id} and ${readableBy(sql, scope)}`;
  return row ?? null;
}

// ——— results reported by a live call's voice agent ———

/** A call as the report of its results reads it, under its row lock. */
export type ReportedCallRow = CallRow & { results_reported_at: Date | null };

/**
 * One call of the organization in the key's mode (and of the key's agents), locked until the end of
 * the transaction: the report of its results and the end of the call take this lock in turn, so each
 * sees what the other committed.
 */
export async function lockCall(tx: Db, scope: CallScope, id: string): Promise<ReportedCallRow | null> {
  const [row] = await tx<ReportedCallRow[]>`
    select ${columnList(tx, CALL_COLUMNS)}, results_reported_at from calls
    where id = ${id} and ${readableBy(tx, scope)}
    for update`;
  return row ?? null;
}

export interface ReportedResults {
  transcript: TranscriptSegment[] | null;
  summary: string | null;
  collectedData: Record<string, unknown> | null;
  successful: boolean | null;
  /** Null keeps what the call has (such as an outcome from the carrier). */
  outcome: string | null;
  recordingUrl: string | null;
}

/** Stores a call's results, once (a field reported null keeps what the call has): null when they were already reported. */
export async function storeResults(
  tx: Db,
  id: string,
  r: ReportedResults,
  at: Date,
): Promise<CallRow | null> {
  const [row] = await tx<CallRow[]>`
    update calls set
      transcript = coalesce(${r.transcript ? tx.json(r.transcript as never) : null}::jsonb, transcript),
      summary = coalesce(${r.summary}::text, summary),
      collected_data = coalesce(${r.collectedData ? tx.json(r.collectedData as never) : null}::jsonb, collected_data),
      successful = coalesce(${r.successful}::boolean, successful),
      outcome = coalesce(${r.outcome}::text, outcome),
      recording_url = coalesce(${r.recordingUrl}::text, recording_url),
      results_reported_at = ${at},
      updated_at = ${nextUpdatedAt(tx, at)}
    where id = ${id} and results_reported_at is null
    returning ${columnList(tx, CALL_COLUMNS)}`;
  return row ?? null;
}

/**
 * Marks a call's results ready when the call has ended and its results exist, once: the call and its
 * transcript when this moved it, null otherwise (not ended, no results, or already ready).
 */
export async function markResultsReady(
  tx: Db,
  id: string,
  at: Date,
): Promise<(CallRow & { transcript: TranscriptSegment[] | null }) | null> {
  const [row] = await tx<(CallRow & { transcript: TranscriptSegment[] | null })[]>`
    update calls set results_ready_at = ${at}, updated_at = ${nextUpdatedAt(tx, at)}
    where id = ${id} and results_reported_at is not null and results_ready_at is null
      and status = any(${ENDED_STATUSES as unknown as string[]}::text[])
    returning ${columnList(tx, CALL_COLUMNS)}, transcript`;
  return row ?? null;
}

/**
 * Moves a call from `from` to `to` at `now` (the service's clock) with the given fields; null when it was
 * not in `from` (already moved).
 */
export async function moveCall(
  sql: Db,
  id: string,
  from: CallStatus,
  to: CallStatus,
  now: Date,
  set: Partial<{
    placed_at: Date;
    started_at: Date;
    ended_at: Date;
    duration_seconds: number;
    summary: string;
    collected_data: Record<string, unknown>;
    successful: boolean;
    outcome: string;
    transcript: TranscriptSegment[];
  }> = {},
  only: { liveDirection?: "web" | "outbound" } = {},
): Promise<CallRow | null> {
  const [row] = await sql<CallRow[]>`
    update calls set
      status = ${to},
      placed_at = coalesce(${set.placed_at ?? null}::timestamptz, placed_at),
      started_at = ${set.started_at ? sql`greatest(${set.started_at}::timestamptz, created_at)` : sql`started_at`},
      ended_at = coalesce(${set.ended_at ?? null}::timestamptz, ended_at),
      duration_seconds = coalesce(${set.duration_seconds ?? null}::integer, duration_seconds),
      summary = coalesce(${set.summary ?? null}::text, summary),
      collected_data = coalesce(${set.collected_data ? sql.json(set.collected_data as never) : null}::jsonb, collected_data),
      successful = coalesce(${set.successful ?? null}::boolean, successful),
      outcome = coalesce(${set.outcome ?? null}::text, outcome),
      transcript = coalesce(${set.transcript ? sql.json(set.transcript as never) : null}::jsonb, transcript),
      updated_at = ${nextUpdatedAt(sql, now)}
    where id = ${id} and status = ${from}
      ${only.liveDirection ? sql`and livemode and direction = ${only.liveDirection}` : sql``}
    returning ${columnList(sql, CALL_COLUMNS)}`;
  return row ?? null;
}

/**
 * The page of a calls list (db/engine/pages.ts). Each filter reads an index of its own, so a page reads
 * about `limit + 1` index rows whatever the statistics: (organization_id, livemode[, status | agent_id |
 * campaign_id], created_at desc, id desc); a key restricted to several agents walks one range per agent.
 * Filters given together read the narrowest of their ranges (a campaign's, else an agent's) and check
 * the others row by row.
 */
export function callsPage(
  sql: Db,
  scope: { organizationId: string; livemode: boolean; agentIds: string[] | null },
  q: PageInput & {
    status?: string | undefined;
    agentId?: string | undefined;
    campaignId?: string | undefined;
  },
): PageRequest<CallRow> {
  const mode: IndexKey[] = [
    ["organization_id", scope.organizationId],
    ["livemode", scope.livemode],
  ];
  const status = q.status ? sql`status = ${q.status}` : undefined;
  let ranges: IndexRange[];
  if (q.campaignId) {
    // A campaign's calls all have the campaign's agent: the agent filters keep all of them or none.
    const agents = [
      ...(scope.agentIds ? [sql`agent_id = any(${scope.agentIds})`] : []),
      ...(q.agentId ? [sql`agent_id = ${q.agentId}`] : []),
    ];
    const filter = [...agents, ...(status ? [status] : [])].reduce<Fragment | undefined>(
      (all, one) => (all ? sql`${all} and ${one}` : one),
      undefined,
    );
    ranges = [{ keys: [...mode, ["campaign_id", q.campaignId]], pinned: true, filter }];
  } else {
    // The agents whose calls the list holds: the one asked for if the key may see it, else the key's.
    const agents = q.agentId
      ? scope.agentIds === null || scope.agentIds.includes(q.agentId)
        ? [q.agentId]
        : []
      : scope.agentIds;
    ranges =
      agents === null
        ? [q.status ? { keys: [...mode, ["status", q.status]], pinned: true } : { keys: mode }]
        : agents.map((agentId) => ({ keys: [...mode, ["agent_id", agentId]], pinned: true, filter: status }));
  }
  return {
    sql,
    table: "calls",
    ranges,
    prefix: "call",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: columnList(sql, CALL_COLUMNS),
  };
}

/** The status of a call and what its lifecycle needs, or null when there is no such call. */
export async function findCallState(
  sql: Db,
  id: string,
): Promise<Pick<CallRow, "status" | "started_at" | "livemode" | "direction"> | null> {
  const [row] = await sql<Pick<CallRow, "status" | "started_at" | "livemode" | "direction">[]>`
    select status, started_at, livemode, direction from calls where id = ${id}`;
  return row ?? null;
}

/** A call by id alone, for the service's own work (a task firing): no organization or mode scope. */
export async function findCallById(sql: Db, id: string): Promise<CallRow | null> {
  const [row] = await sql<CallRow[]>`select ${columnList(sql, CALL_COLUMNS)} from calls where id = ${id}`;
  return row ?? null;
}
