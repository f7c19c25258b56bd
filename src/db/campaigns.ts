import { TIMER_KINDS } from "../timers/kinds.ts";
import { CALL_COLUMNS, type CallRow, columnList } from "./calls.ts";
import type { Db } from "./engine/connection.ts";
import type { IndexKey, IndexRange, PageInput, PageRequest } from "./engine/pages.ts";
import { nextUpdatedAt } from "./engine/updatedAt.ts";

/** Queries of the campaigns and campaign_contacts tables. */

/** The timers that advance the campaigns of calls that just ended (one per campaign). */
export function campaignAdvanceTimers(calls: readonly { campaign_id: string | null }[]) {
  const ids = new Set(calls.flatMap((c) => (c.campaign_id ? [c.campaign_id] : [])));
  return [...ids].map((campaignId) => ({
    kind: TIMER_KINDS.campaignAdvance,
    delayMs: 0,
    payload: { campaignId },
  }));
}

export const CAMPAIGN_STATUSES = ["running", "completed", "cancelled"] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];

export type CampaignRow = {
  id: string;
  organization_id: string;
  livemode: boolean;
  name: string;
  agent_id: string;
  status: CampaignStatus;
  concurrency: number;
  max_attempts: number;
  retry_delay_seconds: number;
  /** When the pending timer of a waiting campaign fires (null: none). */
  wake_at: Date | null;
  total: number;
  pending: number;
  in_progress: number;
  completed: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  /** The row's last change (db/engine/updatedAt.ts); its creation until it changes. */
  updated_at: Date;
};

/** The campaign object of the API. */
export function campaignView(r: CampaignRow) {
  return {
    id: r.id,
    livemode: r.livemode,
    name: r.name,
    agentId: r.agent_id,
    status: r.status,
    concurrency: r.concurrency,
    maxAttempts: r.max_attempts,
    retryDelaySeconds: r.retry_delay_seconds,
    progress: {
      total: r.total,
      pending: r.pending,
      inProgress: r.in_progress,
      completed: r.completed,
      succeeded: r.succeeded,
      failed: r.failed,
      cancelled: r.cancelled,
    },
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
    startedAt: r.started_at ? r.started_at.toISOString() : null,
    completedAt: r.completed_at ? r.completed_at.toISOString() : null,
  };
}
export type CampaignView = ReturnType<typeof campaignView>;

export interface CampaignTarget {
  phone: string;
  name: string | null;
  contactId: string | null;
  variables: Record<string, unknown>;
}

export async function insertCampaign(
  sql: Db,
  c: Pick<
    CampaignRow,
    | "id"
    | "organization_id"
    | "livemode"
    | "name"
    | "agent_id"
    | "concurrency"
    | "max_attempts"
    | "retry_delay_seconds"
    | "created_at"
    | "started_at"
  >,
  targets: readonly CampaignTarget[],
): Promise<void> {
  await sql`
    insert into campaigns (id, organization_id, livemode, name, agent_id, status, concurrency, max_attempts,
      retry_delay_seconds, total, pending, in_progress, created_at, started_at, updated_at)
    values (${c.id}, ${c.organization_id}, ${c.livemode}, ${c.name}, ${c.agent_id}, 'running', ${c.concurrency},
      ${c.max_attempts}, ${c.retry_delay_seconds}, ${targets.length}, ${targets.length}, 0, ${c.created_at},
      ${c.started_at}, ${c.created_at})`;
  await sql`
    insert into campaign_contacts (campaign_id, position, phone, name, contact_id, variables)
    select ${c.id}, v.position, v.phone, v.name, v.contact_id, v.variables::jsonb
    from unnest(
      ${targets.map((_, i) => i)}::integer[],
      ${targets.map((t) => t.phone)}::text[],
      ${targets.map((t) => t.name)}::text[],
      ${targets.map((t) => t.contactId)}::text[],
      ${targets.map((t) => JSON.stringify(t.variables))}::text[]
    ) as v(position, phone, name, contact_id, variables)`;
}

type Scope = { organizationId: string; livemode: boolean; agentIds: string[] | null };

/** The scope of a campaign read: organization, mode, the key's agents. */
export function campaignsScope(sql: Db, scope: Scope) {
  return sql`organization_id = ${scope.organizationId} and livemode = ${scope.livemode}
    ${scope.agentIds ? sql`and agent_id = any(${scope.agentIds})` : sql``}`;
}

/**
 * The page of a campaigns list (db/engine/pages.ts), on (organization_id, livemode[, status | agent_id],
 * created_at desc, id desc): one range per agent of a key restricted to some (a status filter is then
 * checked row by row within them).
 */
export function campaignsPage(
  sql: Db,
  scope: Scope,
  q: PageInput & { status?: string | undefined },
): PageRequest<CampaignRow> {
  const mode: IndexKey[] = [
    ["organization_id", scope.organizationId],
    ["livemode", scope.livemode],
  ];
  const ranges: IndexRange[] =
    scope.agentIds === null
      ? [q.status ? { keys: [...mode, ["status", q.status]], pinned: true } : { keys: mode }]
      : scope.agentIds.map((agentId) => ({
          keys: [...mode, ["agent_id", agentId]],
          pinned: true,
          filter: q.status ? sql`status = ${q.status}` : undefined,
        }));
  return { sql, table: "campaigns", ranges, prefix: "cmp", limit: q.limit, startingAfter: q.starting_after };
}

export async function findCampaign(
  sql: Db,
  scope: Scope,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<CampaignRow | null> {
  const [row] = await sql<CampaignRow[]>`
    select * from campaigns where id = ${id} and ${campaignsScope(sql, scope)}
    ${opts.forUpdate ? sql`for update` : sql``}`;
  return row ?? null;
}

/** The campaign row, locked for the rest of the transaction: every change of a campaign goes through it. */
export async function lockCampaign(sql: Db, id: string): Promise<CampaignRow | null> {
  const [row] = await sql<CampaignRow[]>`select * from campaigns where id = ${id} for update`;
  return row ?? null;
}

/**
 * Settles the contacts whose call has ended: a completed call is a success; a call that ended
 * otherwise (failed, no_answer, busy, cancelled) is tried again while attempts remain and the
 * campaign runs, from `retry_delay_seconds` after it ended; else it is a failure.
 */
export async function settleEndedCalls(sql: Db, campaign: CampaignRow, now: Date): Promise<void> {
  const retry = campaign.status === "running";
  await sql`
    update campaign_contacts cc set
      status = case
        when c.status = 'completed' then 'succeeded'
        when ${retry} and cc.attempts < ${campaign.max_attempts} then 'pending'
        else 'failed' end,
      retry_at = case
        when c.status <> 'completed' and ${retry} and cc.attempts < ${campaign.max_attempts}
          then coalesce(c.ended_at, ${now}::timestamptz) + ${campaign.retry_delay_seconds}::integer * interval '1 second'
        end
    from calls c
    where cc.campaign_id = ${campaign.id} and cc.status = 'in_progress' and c.id = cc.call_id
      and c.status in ('completed', 'failed', 'no_answer', 'busy', 'cancelled')`;
}

export async function countInProgress(sql: Db, campaignId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from campaign_contacts where campaign_id = ${campaignId} and status = 'in_progress'`;
  return row!.n;
}

type PendingRow = {
  position: number;
  phone: string;
  name: string | null;
  contact_id: string | null;
  variables: Record<string, unknown>;
};

function pendingTarget(r: PendingRow): CampaignTarget & { position: number } {
  return {
    position: r.position,
    phone: r.phone,
    name: r.name,
    contactId: r.contact_id,
    variables: r.variables,
  };
}

/** Up to `n` pending contacts that may be called at `now` (a retry only once due), in their order. */
export async function nextPending(
  sql: Db,
  campaignId: string,
  n: number,
  now: Date,
): Promise<(CampaignTarget & { position: number })[]> {
  if (n <= 0) return [];
  const rows = await sql<PendingRow[]>`
    select position, phone, name, contact_id, variables from campaign_contacts
    where campaign_id = ${campaignId} and status = 'pending' and (retry_at is null or retry_at <= ${now})
    order by position limit ${n}`;
  return rows.map(pendingTarget);
}

/** The positions of every pending contact, due or not, in order (those a campaign gives up on when the organization can call no more). */
export async function pendingPositions(sql: Db, campaignId: string): Promise<number[]> {
  const rows = await sql<{ position: number }[]>`
    select position from campaign_contacts where campaign_id = ${campaignId} and status = 'pending' order by position`;
  return rows.map((r) => r.position);
}

/** When the earliest retry not due at `now` becomes due, or null when none waits. */
export async function earliestRetry(sql: Db, campaignId: string, now: Date): Promise<Date | null> {
  const [row] = await sql<{ at: Date | null }[]>`
    select min(retry_at) as at from campaign_contacts
    where campaign_id = ${campaignId} and status = 'pending' and retry_at > ${now}`;
  return row?.at ?? null;
}

/**
 * The running live campaigns of an organization that wait for a timer still to come (a call window's
 * opening, room in the hour, the organization's calls in progress).
 */
export async function waitingLiveCampaigns(sql: Db, organizationId: string, now: Date): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select id from campaigns
    where organization_id = ${organizationId} and livemode and status = 'running' and wake_at > ${now}`;
  return rows.map((r) => r.id);
}

/**
 * Records when the campaign's waiting timer fires: the engine's own bookkeeping, not part of the
 * campaign object, so its `updated_at` stays.
 */
export async function setWake(sql: Db, campaignId: string, at: Date): Promise<void> {
  await sql`update campaigns set wake_at = ${at} where id = ${campaignId}`;
}

/** A pending contact refused by a calling rule, the id of the call that says why, and the rule's code. */
export interface Refusal {
  position: number;
  callId: string;
  code: string;
}

/**
 * Contacts refused by a calling rule, however many, in one statement: each still pending fails, never
 * retried, with a call of its own (in the campaign's mode) written `failed` at `at` with the rule's
 * code as `outcome` (never placed: counted in no limit, nothing reserved). Returns those calls in the
 * order given.
 */
export async function refuseContacts(
  sql: Db,
  campaign: Pick<CampaignRow, "id" | "organization_id" | "livemode" | "agent_id">,
  language: string,
  refusals: readonly Refusal[],
  at: Date,
): Promise<CallRow[]> {
  if (refusals.length === 0) return [];
  return sql<CallRow[]>`
    with v as (
      select * from unnest(${refusals.map((r) => r.position)}::integer[], ${refusals.map((r) => r.callId)}::text[],
        ${refusals.map((r) => r.code)}::text[]) with ordinality as v(position, call_id, code, ord)
    ), refused as (
      update campaign_contacts cc set status = 'failed', call_id = v.call_id, retry_at = null
      from v
      where cc.campaign_id = ${campaign.id} and cc.position = v.position and cc.status = 'pending'
      returning cc.phone, cc.contact_id, cc.variables, v.call_id, v.code, v.ord
    ), calls as (
      insert into calls (id, organization_id, livemode, status, agent_id, to_number, contact_id, campaign_id,
        direction, variables, language, created_at, updated_at, ended_at, successful, outcome)
      select call_id, ${campaign.organization_id}, ${campaign.livemode}::boolean, 'failed', ${campaign.agent_id},
        phone, contact_id, ${campaign.id}, 'outbound', variables, ${language}, ${at}::timestamptz, ${at}::timestamptz,
        ${at}::timestamptz, false, code
      from refused
      returning ${columnList(sql, CALL_COLUMNS)}
    )
    select calls.* from calls join refused on refused.call_id = calls.id order by refused.ord`;
}

export async function markCalling(
  sql: Db,
  campaignId: string,
  started: readonly { position: number; callId: string }[],
): Promise<void> {
  if (started.length === 0) return;
  await sql`
    update campaign_contacts cc set status = 'in_progress', call_id = v.call_id, attempts = cc.attempts + 1,
      retry_at = null
    from unnest(${started.map((s) => s.position)}::integer[], ${started.map((s) => s.callId)}::text[])
      as v(position, call_id)
    where cc.campaign_id = ${campaignId} and cc.position = v.position and cc.status = 'pending'`;
}

/** Contacts not yet called are never called: pending → cancelled. */
export async function cancelPending(sql: Db, campaignId: string): Promise<void> {
  await sql`update campaign_contacts set status = 'cancelled' where campaign_id = ${campaignId} and status = 'pending'`;
}

/**
 * Recomputes the counters from the contacts and applies the status change, if any, in one statement,
 * at `now`. A running campaign becomes `completed` when every contact has been called and every call
 * has ended (none cancelled), even on a cancel that comes after its last call ended but before the
 * engine saw it; otherwise a cancel makes it `cancelled`. `updated_at` moves only when the campaign
 * does: a step that runs again changes nothing, its time included.
 */
export async function refreshCampaign(
  sql: Db,
  id: string,
  opts: { cancel?: boolean; now: Date },
): Promise<CampaignRow> {
  const [row] = await sql<CampaignRow[]>`
    with counts as (
      select
        count(*) filter (where status = 'pending')::int as pending,
        count(*) filter (where status = 'in_progress')::int as in_progress,
        count(*) filter (where status = 'succeeded')::int as succeeded,
        count(*) filter (where status = 'failed')::int as failed,
        count(*) filter (where status = 'cancelled')::int as cancelled
      from campaign_contacts where campaign_id = ${id}
    ), next as (
      select counts.*,
        case
          when c.status <> 'running' then c.status
          when counts.pending = 0 and counts.in_progress = 0 and counts.cancelled = 0 then 'completed'
          when ${opts.cancel ?? false} then 'cancelled'
          else 'running' end as status,
        case
          when c.status = 'running'
            and counts.pending = 0 and counts.in_progress = 0 and counts.cancelled = 0 then ${opts.now}::timestamptz
          else c.completed_at end as completed_at
      from campaigns c, counts where c.id = ${id}
    )
    update campaigns set
      pending = next.pending,
      in_progress = next.in_progress,
      succeeded = next.succeeded,
      failed = next.failed,
      completed = next.succeeded + next.failed,
      cancelled = next.cancelled,
      status = next.status,
      completed_at = next.completed_at,
      updated_at = case
        when (campaigns.pending, campaigns.in_progress, campaigns.succeeded, campaigns.failed, campaigns.cancelled,
            campaigns.status, campaigns.completed_at)
          is not distinct from (next.pending, next.in_progress, next.succeeded, next.failed, next.cancelled,
            next.status, next.completed_at)
          then campaigns.updated_at
        else ${nextUpdatedAt(sql, opts.now)} end
    from next
    where campaigns.id = ${id}
    returning campaigns.*`;
  return row!;
}
