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
  // One JSON parameter, as every batch statement takes its rows: an event's data as text in a text[]
  // had the driver escape every quote of its JSON (`arrayEscape`, 2 % of the server's profile under
  // live calls), and PostgreSQL unescape them again.
  const rows = events.map((e) => ({
    id: e.id,
    organization_id: e.organization_id,
    agent_id: e.agent_id,
    type: e.type,
    livemode: e.livemode,
    data: e.data,
    created_at: e.created_at.toISOString(),
  }));
  await sql`
    insert into events (id, organization_id, agent_id, type, livemode, data, created_at)
    select r.id, r.organization_id, r.agent_id, r.type, r.livemode, r.data, r.created_at
    from batch_rows(${sql.json(rows as never)}::json) e
      cross join lateral json_to_record(e) as r(id text, organization_id text, agent_id text, type text,
        livemode boolean, data jsonb, created_at timestamptz)`;
}

/**
 * The page of an events list (db/engine/pages.ts); each filter has its index: (organization_id,
 * livemode[, type | agent_id], created_at desc, id desc). A key restricted to some agents sees only
 * their objects' events, one range per agent (a type filter is then checked row by row within them).
 * Every range is pinned to its own index, whatever other index on created_at the table may gain.
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

/**
 * One event of the organization and mode, locked against its removal until the transaction ends (a
 * removal under way is waited for: then null), for a statement that refers to it.
 */
export async function lockEvent(
  tx: Db,
  scope: { organizationId: string; livemode: boolean },
  id: string,
): Promise<EventRow | null> {
  const [row] = await tx<EventRow[]>`
    select * from events where id = ${id} and organization_id = ${scope.organizationId}
      and livemode = ${scope.livemode}
    for key share`;
  return row ?? null;
}

/**
 * One bounded step of retention (in a transaction), walking the events in id order (the order they were created in: ids
 * begin with their creation time) from after `from`: the next `limit` events are read; of those created
 * before `before`, the finished deliveries made before it go, and then the events that no delivery refers
 * to any more. A delivery still pending (retries run for more than a day) stays, and so does a delivery
 * made after `before` (a redelivery): each keeps its event. Events another transaction holds (a
 * redelivery under way) are left for a later pass. Returns how many went of each and, when the step
 * read a whole batch of old events, the last id read: the next step goes on after it. The walk ends at
 * the first recent event (or the last event).
 */
export async function deleteEventsBefore(
  tx: Db,
  before: Date,
  limit: number,
  from: string | null,
): Promise<{ deliveries: number; events: number; next: string | null }> {
  const batch = await tx<{ id: string; old: boolean }[]>`
    select id, created_at < ${before} as old from events ${from === null ? tx`` : tx`where id > ${from}`}
    order by id
    limit ${limit}`;
  const old = batch.filter((e) => e.old).map((e) => e.id);
  // Found by their keys (`= any`), whatever the planner believes of the tables' sizes.
  const [row] =
    old.length === 0
      ? [{ deliveries: 0, events: 0 }]
      : await tx<{ deliveries: number; events: number }[]>`
          with locked as (
            select id from events where id = any(${old}::text[]) for update skip locked
          ), deliveries as (
            delete from webhook_deliveries d
            where d.event_id = any(${old}::text[]) and d.event_id in (select id from locked)
              and d.status <> 'pending' and d.created_at < ${before}
            returning d.id
          ), gone as (
            delete from events e
            where e.id = any(${old}::text[]) and e.id in (select id from locked) and not exists (
              select from webhook_deliveries d
              where d.event_id = e.id and (d.status = 'pending' or d.created_at >= ${before}))
            returning e.id
          )
          select (select count(*) from deliveries)::int as deliveries, (select count(*) from gone)::int as events`;
  return {
    deliveries: row!.deliveries,
    events: row!.events,
    next: batch.length === limit && old.length === limit ? batch[limit - 1]!.id : null,
  };
}
