import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";
import type { IndexKey, IndexRange, PageInput, PageRequest } from "./engine/pages.ts";

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
 * The page of an events list (db/engine/pages.ts); each filter has its index: (organization_id,
 * livemode[, type | agent_id], created_at desc, id desc). A key restricted to some agents sees only
 * their objects' events, one range per agent (a type filter is then checked row by row within them).
 * Every range is pinned: the retention's index on created_at alone would serve any of them too.
 */
export function eventsPage(
  sql: Db,
  scope: { organizationId: string; livemode: boolean; agentIds: string[] | null },
  q: PageInput & { type?: string | undefined },
): PageRequest<EventRow> {
  const mode: IndexKey[] = [
    ["organization_id", scope.organizationId],
    ["livemode", scope.livemode],
  ];
  const ranges: IndexRange[] =
    scope.agentIds === null
      ? [{ keys: q.type !== undefined ? [...mode, ["type", q.type]] : mode, pinned: true }]
      : scope.agentIds.map((agentId) => ({
          keys: [...mode, ["agent_id", agentId]],
          pinned: true,
          filter: q.type !== undefined ? sql`type = ${q.type}` : undefined,
        }));
  return {
    sql,
    table: "events",
    ranges,
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
