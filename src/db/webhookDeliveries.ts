import type { Fragment } from "postgres";
import { rowOf } from "../ids.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { Db } from "./engine/connection.ts";
import type { PageInput, PageRequest } from "./engine/pages.ts";
import { type InsertedTimerRow, kindLiteral } from "./timers.ts";

/**
 * Statements of webhook deliveries: one row per event and endpoint that receives it (created by the
 * trigger of sql/0011 with the event), with its attempts and last outcome.
 */

export type DeliveryStatus = "pending" | "delivered" | "failed" | "dropped";

/** The row of a delivery, locked until the transaction ends (waits for a transaction that is changing it). */
export async function lockDeliveryState(
  tx: Db,
  id: number,
): Promise<{ attempts: number; status: DeliveryStatus } | null> {
  const [row] = await tx<{ attempts: number; status: DeliveryStatus }[]>`
    select attempts, status from webhook_deliveries where id = ${id} for update`;
  return row ?? null;
}

/** What the timer of a delivery needs to decide what comes next. */
export interface HandoffState {
  status: DeliveryStatus;
  attempts: number;
  organization_id: string;
  /** The endpoint still exists and is enabled. */
  endpoint_ready: boolean;
  /** Milliseconds left of the attempt under way, whose outcome is not written yet (0: none). */
  in_flight_ms: number;
}

/** An attempt whose outcome is not written after `inFlightMs` from its start is taken as lost. */
export async function readHandoffState(tx: Db, id: number, inFlightMs: number): Promise<HandoffState | null> {
  const [row] = await tx<HandoffState[]>`
    select d.status, d.attempts, ev.organization_id,
      exists (select from webhook_endpoints e where e.id = d.endpoint_id and e.enabled) as endpoint_ready,
      greatest(0, coalesce(
        extract(epoch from d.attempt_started_at - now()) * 1000 + ${inFlightMs}::float8, 0))::float8 as in_flight_ms
    from webhook_deliveries d join events ev on ev.id = d.event_id
    where d.id = ${id}`;
  return row ?? null;
}

export async function recordDeliveryOutcome(
  tx: Db,
  id: number,
  o: {
    status: DeliveryStatus;
    lastStatus: number | null;
    lastError: string | null;
    durationMs: number;
    finishedAt: Date | null;
  },
): Promise<void> {
  await tx`
    update webhook_deliveries
    set status = ${o.status}, last_status = ${o.lastStatus}, last_error = ${o.lastError},
      last_duration_ms = ${o.durationMs}, finished_at = ${o.finishedAt}, attempt_started_at = null
    where id = ${id}`;
}

/** A started attempt: what its request needs, and the timer that stands in for its outcome. */
export interface StartedAttempt {
  attempts: number;
  endpoint_id: string;
  url: string;
  secret: string;
  /** The secrets replaced by rotations that still sign beside the current one, newest first. */
  previous_secrets: string[];
  event_id: string;
  type: string;
  livemode: boolean;
  data: unknown;
  created_at: Date;
  /** The inserted timer (as TimerScheduler.insertFrom returns it). */
  net: InsertedTimerRow;
}

/**
 * Starts attempt `attempt` of a delivery, in one statement, when its request is about to go out: counts
 * it (fenced: the delivery is pending, its endpoint exists and is enabled, and exactly `attempt − 1`
 * attempts were made, so one process starts it), and swaps the timer that held the delivery while it
 * waited (`heldBy`) for the one that stands in for this attempt's outcome, due when the outcome should
 * have been written (`net` inserts the rows it is given). Null when the fence refused: nothing changed.
 */
export async function startAttempt(
  sql: Db,
  a: { id: number; attempt: number; heldBy: string; outcomeWithinMs: number },
  net: (rows: Fragment) => Fragment,
): Promise<StartedAttempt | null> {
  const [row] = await sql<StartedAttempt[]>`
    with started as (
      update webhook_deliveries d set attempts = d.attempts + 1, attempt_started_at = now()
      from events ev, webhook_endpoints e
      where d.id = ${a.id} and d.status = 'pending' and d.attempts = ${a.attempt - 1}
        and ev.id = d.event_id and e.id = d.endpoint_id and e.enabled
      returning d.id, d.attempts, d.endpoint_id, e.url, e.secret,
        array(
          select p ->> 'secret' from jsonb_array_elements(e.previous_secrets) with ordinality as s (p, o)
          where (p ->> 'expiresAt')::timestamptz > now() order by o
        ) as previous_secrets,
        ev.id as event_id, ev.type, ev.livemode, ev.data, ev.created_at
    ),
    held as (
      delete from timers where id = ${a.heldBy}::bigint and status = 'pending' and exists (select from started)
    ),
    net as (${net(sql`
      select ${kindLiteral(sql, TIMER_KINDS.webhookDelivery)}::text as kind, now() + ${a.outcomeWithinMs}::float8 * interval '1 millisecond' as due_at,
        jsonb_build_object('deliveryId', id) as payload
      from started`)})
    select s.attempts, s.endpoint_id, s.url, s.secret, s.previous_secrets, s.event_id, s.type, s.livemode,
      s.data, s.created_at, (select to_jsonb(net) from net) as net
    from started s`;
  return row ?? null;
}

/**
 * Ends a pending delivery that cannot be attempted: `dropped` when its endpoint was deleted or
 * disabled, `failed` when its last attempt's outcome was never written.
 */
export async function endUncountedDelivery(tx: Db, id: number): Promise<void> {
  await tx`
    update webhook_deliveries
    set status = case when exists (select from webhook_endpoints where id = endpoint_id and enabled) then 'failed'
      else 'dropped' end,
      last_error = case when exists (select from webhook_endpoints where id = endpoint_id and not enabled)
        then 'endpoint disabled' else last_error end,
      attempt_started_at = null,
      finished_at = now()
    where id = ${id} and status = 'pending'`;
}

/** A delivery as its endpoint's log shows it. `id` is the row's number (the driver reads bigint as text). */
export interface DeliveryLogRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  attempts: number;
  status: DeliveryStatus;
  last_status: number | null;
  last_duration_ms: number | null;
  last_error: string | null;
  created_at: Date;
}

/**
 * The page of an endpoint's delivery log (db/engine/pages.ts), on webhook_deliveries_endpoint_created.
 * `rowIdKey`: the key of the ids shown (ids.ts, `rowId`).
 */
export function deliveriesPage(
  sql: Db,
  endpointId: string,
  q: PageInput,
  rowIdKey: Uint8Array,
): PageRequest<DeliveryLogRow> {
  return {
    sql,
    table: "webhook_deliveries",
    // Pinned to its own index, whatever other index on created_at the table may gain.
    ranges: [{ keys: [["endpoint_id", endpointId]], pinned: true }],
    prefix: "whd",
    limit: q.limit,
    startingAfter: q.starting_after,
    cursorOf: (cursor) => rowOf(rowIdKey, cursor, "whd"),
    columns: deliveryLogColumns(sql),
  };
}

/** What the log reads; `id` uncast, so that a page orders by the number, not its text. */
export const deliveryLogColumns = (sql: Db): Fragment =>
  sql`id, event_id, endpoint_id, attempts, status, last_status, last_duration_ms, last_error, created_at`;

/**
 * A new delivery of an event to every enabled endpoint that receives it: the rule of the delivery
 * trigger (`webhook_endpoints_receiving`, sql/0020). Their first attempts' timers: `firstAttempts`.
 */
export function redeliverEventRows(
  sql: Db,
  event: { id: string; organization_id: string; livemode: boolean; type: string },
): Promise<(DeliveryLogRow & { endpoint_livemode: boolean })[]> {
  return sql<(DeliveryLogRow & { endpoint_livemode: boolean })[]>`
    with created as (
      insert into webhook_deliveries (event_id, endpoint_id)
      select ${event.id}, r.id
      from webhook_endpoints_receiving(${event.organization_id}, ${event.livemode}, ${event.type}) r
      order by r.id
      returning ${deliveryLogColumns(sql)}
    )
    select created.*, e.livemode as endpoint_livemode
    from created join webhook_endpoints e on e.id = created.endpoint_id
    order by created.id`;
}

/** The timers of the first attempts of these deliveries, due now, as rows for TimerScheduler.insertFrom. */
export const firstAttempts = (sql: Db, deliveryIds: readonly string[]): Fragment => sql`
  select ${kindLiteral(sql, TIMER_KINDS.webhookDelivery)}::text as kind, now() as due_at, jsonb_build_object('deliveryId', d) as payload
  from unnest(${deliveryIds as string[]}::bigint[]) d`;
