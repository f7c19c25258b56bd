import type { Fragment } from "postgres";
import { canonicalNumber } from "../phoneNumbers.ts";
import type { AgentRow } from "./agents.ts";
import type { Db } from "./engine/connection.ts";
import { planUsedSql } from "./minutes.ts";
import type { OrganizationRow } from "./organizations.ts";

/**
 * Statements that decide whether a live phone call may be placed: what the checks read (the
 * organization, its plan usage, the do-not-call list) and the organization's limits row, locked by
 * every placement (call_limits, sql/0025).
 */

/** A live phone call in progress counts against the organization's maxConcurrentCalls. */
const LIVE_PHONE = "livemode and direction = 'outbound'";

export interface CallFacts {
  organization: OrganizationRow;
  /** Plan minutes counted this month (reservations of running calls included). */
  plan_used: number;
  /** Whether `to` is on the organization's live do-not-call list. */
  blocked: boolean;
  /** The agent asked for, when it is the organization's. */
  agent: AgentRow | null;
}

/**
 * The organization, its plan usage for `month`, whether `to` is blocked and the agent `agentId`, in
 * one statement; null without the organization. (`readCallFactsOf` for one call.)
 */
export async function readCallFacts(
  sql: Db,
  organizationId: string,
  call: { to: string | null; agentId: string | null },
  month: string,
): Promise<CallFacts | null> {
  const [read] = await readCallFactsOf(sql, [{ organizationId, ...call, contactId: null }], month);
  return read!.facts;
}

type FactsRow = OrganizationRow & {
  plan_used: number;
  blocked: boolean;
  agent: (AgentRow & { created_at: string }) | null;
};

function factsOf(row: FactsRow): CallFacts {
  const { plan_used, blocked, agent, ...organization } = row;
  return {
    organization,
    plan_used,
    blocked,
    agent: agent ? { ...agent, created_at: new Date(agent.created_at) } : null,
  };
}

/**
 * What the checks of several calls read, in one statement (a batch of placements): for each, its
 * organization, the organization's plan usage for `month`, whether `to` is blocked (false without a
 * number), the agent `agentId` when it is the organization's, and whether the contact, when the call
 * names one, is the organization's. Answers in the order of `calls`; null facts without the
 * organization.
 */
export async function readCallFactsOf(
  sql: Db,
  calls: readonly {
    organizationId: string;
    to: string | null;
    agentId: string | null;
    contactId: string | null;
  }[],
  month: string,
): Promise<{ facts: CallFacts | null; contactFound: boolean | null }[]> {
  const input = calls.map((c, i) => ({
    i,
    organization_id: c.organizationId,
    // In its one spelling: a number stored before numbers were (a scheduled call's, a campaign contact's)
    // still meets its do-not-call entry.
    to_number: c.to === null ? null : canonicalNumber(c.to),
    agent_id: c.agentId,
    contact_id: c.contactId,
  }));
  const rows = await sql<(FactsRow & { i: number; contact_found: boolean | null })[]>`
    select r.i, o.*,
      ${planUsedSql(sql, sql`o.id`, month)} as plan_used,
      exists(select 1 from blocked_numbers b
        where b.organization_id = o.id and b.livemode and b.phone = r.to_number) as blocked,
      (select row_to_json(a) from agents a where a.id = r.agent_id and a.organization_id = o.id) as agent,
      case when r.contact_id is not null then
        exists(select 1 from contacts k where k.id = r.contact_id and k.organization_id = o.id) end as contact_found
    from batch_rows(${sql.json(input as never)}::json) e
      cross join lateral json_to_record(e) as r(i integer, organization_id text, to_number text, agent_id text,
        contact_id text)
      join organizations o on o.id = r.organization_id`;
  const byIndex = new Map(rows.map(({ i, contact_found, ...row }) => [i, { row, contact_found }]));
  return calls.map((_, i) => {
    const found = byIndex.get(i);
    return { facts: found ? factsOf(found.row) : null, contactFound: found?.contact_found ?? null };
  });
}

/**
 * The statements that lock the limits rows of `organizationIds` until the transaction ends (creating each one, with the
 * hour counted from the calls, on first use). Every placement takes these locks first, in the order
 * of the organizations' ids, so that two placements never deadlock. What is read after them, in a
 * later statement, includes every placement committed before: a statement's snapshot is taken when it
 * starts, and statements sent together still start one after the other, so the placement's
 * statement (db/phonePlacements.ts) goes out in the same round trip as these two.
 *
 * Two statements for any number of organizations (a batch names up to one per request): the rows
 * missing are made first, then every row is locked, in order. A row another transaction is making
 * is waited for by the first (its insert meets the other's), so the second sees it made.
 * `organizationIds`: each once, in the order of the ids (db/phonePlacements.ts, `placePhoneCalls`).
 */
export function lockCallLimits(sql: Db, organizationIds: readonly string[], hourAgo: Date) {
  return [makeCallLimitsSql(sql, organizationIds, hourAgo), lockCallLimitsSql(sql, organizationIds)] as const;
}

/**
 * The first statement of `lockCallLimits` (also explained by the plan tests): the rows missing, each
 * with the calls placed in the last hour counted; only for a row it makes, never on every placement.
 */
export function makeCallLimitsSql(sql: Db, organizationIds: readonly string[], hourAgo: Date) {
  return sql`
    insert into call_limits (organization_id, hour_cut, hour_count)
    select o.id, ${hourAgo}, (
      select count(*)::int from calls
      where organization_id = o.id and ${sql.unsafe(LIVE_PHONE)} and placed_at > ${hourAgo})
    from unnest(${organizationIds as string[]}::text[]) as o(id)
    where not exists (select 1 from call_limits l where l.organization_id = o.id)
    order by o.id
    on conflict (organization_id) do nothing`;
}

/**
 * The second: every row locked, in the order of the ids (rows are locked as the sorted scan returns
 * them, so the order holds however the rows are stored).
 */
function lockCallLimitsSql(sql: Db, organizationIds: readonly string[]) {
  return sql`
    select organization_id from call_limits
    where organization_id = any(${organizationIds as string[]}::text[])
    order by organization_id
    for update`;
}

/**
 * Under the locks (after `lockCallLimits`), for each organization: the hour's row (`hour_count`
 * placements have `placed_at` > `hour_cut`), the bound it keeps of the calls in progress
 * (sql/0038), the placements that left the hour since the row's cut, and the earliest placement still
 * in the hour (when it leaves, the hour has room again). A part of the placement's statement
 * (db/phonePlacements.ts), also explained by the plan tests. `organizationIds` selects the ids.
 */
export function callLoadSql(sql: Db, organizationIds: Fragment, hourAgo: Date): Fragment {
  const live = sql.unsafe(LIVE_PHONE);
  return sql`
    select l.organization_id, l.hour_cut, l.hour_count, l.in_progress_bound,
      (select count(*)::int from calls where organization_id = l.organization_id and ${live}
        and placed_at > l.hour_cut and placed_at <= greatest(l.hour_cut, ${hourAgo}::timestamptz)) as left,
      (select min(placed_at) from calls where organization_id = l.organization_id and ${live}
        and placed_at > greatest(l.hour_cut, ${hourAgo}::timestamptz)) as oldest
    from call_limits l where l.organization_id in (${organizationIds})`;
}

/**
 * The organization's live phone calls `initiated`, `ringing` or `ongoing` (`organizationId`, an SQL
 * expression such as a column). Counted by `count(status)`, not `count(*)`: a column outside the index
 * makes it a plain index scan, which marks the entries of calls that ended as dead once it has seen
 * them; an index-only scan never does, and until a vacuum visited the heap of every ended call on each
 * placement (4 ms on a few thousand calls, under the organization's lock).
 */
export function inProgressSql(sql: Db, organizationId: Fragment): Fragment {
  return sql`(select count(status)::int from calls where organization_id = ${organizationId}
    and ${sql.unsafe(LIVE_PHONE)} and status in ('initiated', 'ringing', 'ongoing'))`;
}
