import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";
import type { PageRequest } from "./engine/pages.ts";

/** Statements of the events outbox. A trigger (sql/0011) creates each event's webhook deliveries. */

export interface EventRow {
  id: string;
  organization_id: string;
  agent_id: string | null;
  type: string;
  livemode: boolean;
  data: Record<string, unknown>;
  created_at: Date;
}

/** Writes events in one statement, in the order given. */
export async function insertEvents(sql: Db, events: readonly EventRow[]): Promise<void> {
  if (events.length === 0) return;
  if (events.length === 1) {
    const e = events[0]!;
    await sql`
      insert into events (id, organization_id, agent_id, type, livemode, data, created_at)
      values (${e.id}, ${e.organization_id}, ${e.agent_id}, ${e.type}, ${e.livemode}, ${sql.json(e.data as never)},
        ${e.created_at})`;
    return;
  }
  // Booleans travel as text: the driver writes a boolean[] parameter from JS booleans only.
  await sql`
    insert into events (id, organization_id, agent_id, type, livemode, data, created_at)
    select id, org, agent, type, livemode::boolean, data::jsonb, created_at
    from unnest(${events.map((e) => e.id)}::text[], ${events.map((e) => e.organization_id)}::text[],
      ${events.map((e) => e.agent_id)}::text[], ${events.map((e) => e.type)}::text[],
      ${events.map((e) => String(e.livemode))}::text[], ${events.map((e) => JSON.stringify(e.data))}::text[],
      ${events.map((e) => e.created_at.toISOString())}::timestamptz[])
      as v(id, org, agent, type, livemode, data, created_at)`;
}

/**
 * The scope of an events list; each shape has its index: (organization_id, livemode[, type | agent_id],
 * created_at desc, id desc). A key restricted to some agents sees only their objects' events.
 */
export function eventsScope(
  sql: Db,
  scope: { organizationId: string; livemode: boolean; agentIds: string[] | null },
  filters: { type?: string | undefined },
): Fragment {
  return sql`organization_id = ${scope.organizationId} and livemode = ${scope.livemode}
    ${
      scope.agentIds === null
        ? sql``
        : scope.agentIds.length === 1
          ? sql`and agent_id = ${scope.agentIds[0]!}`
          : sql`and agent_id = any(${scope.agentIds}::text[])`
    }
    ${filters.type !== undefined ? sql`and type = ${filters.type}` : sql``}`;
}

/**
 * The page of an events list (db/engine/pages.ts). For a key restricted to several agents the walk
 * probes each agent's index range: `agent_id = any(…)` on one index yields each agent's rows in turn,
 * not in time order (PostgreSQL 15), so a step planned on it sorts every matching row.
 */
export function eventsPage(
  sql: Db,
  scope: { organizationId: string; livemode: boolean; agentIds: string[] | null },
  q: { limit: number; starting_after?: string | undefined; type?: string | undefined },
): PageRequest<EventRow> {
  const branches =
    scope.agentIds && scope.agentIds.length > 1
      ? scope.agentIds.map((agentId) => eventsScope(sql, { ...scope, agentIds: [agentId] }, q))
      : undefined;
  return {
    sql,
    table: "events",
    where: eventsScope(sql, scope, q),
    ...(branches ? { branches } : {}),
    prefix: "evt",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: eventListColumns(sql),
  };
}

/** The columns an events list reads. */
export function eventListColumns(sql: Db): Fragment {
  return sql`id, type, livemode, data, created_at`;
}

/** One event of the organization and mode, or null. */
export async function findEvent(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  id: string,
): Promise<EventRow | null> {
  const [row] = await sql<EventRow[]>`
    select * from events where id = ${id} and organization_id = ${scope.organizationId}
      and livemode = ${scope.livemode}`;
  return row ?? null;
}

/**
 * Removes up to `limit` webhook deliveries created before `before`, oldest first, and then up to `limit`
 * events created before it that no delivery refers to any more (a recent redelivery keeps its event).
 * Rows another transaction holds are skipped for a later pass. Returns how many went of each.
 */
export async function deleteEventsBefore(
  sql: Db,
  before: Date,
  limit: number,
): Promise<{ deliveries: number; events: number }> {
  const deliveries = await sql`
    delete from webhook_deliveries where id in (
      select id from webhook_deliveries where created_at < ${before}
      order by created_at limit ${limit} for update skip locked)`;
  const events = await sql`
    delete from events where id in (
      select e.id from events e
      where e.created_at < ${before}
        and not exists (select from webhook_deliveries d where d.event_id = e.id)
      order by e.created_at limit ${limit} for update skip locked)`;
  return { deliveries: deliveries.count, events: events.count };
}
