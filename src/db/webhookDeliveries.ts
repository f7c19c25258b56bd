import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";

/**
 * Statements of webhook deliveries: one row per event and endpoint that receives it (created by the
 * trigger of sql/0011 with the event), with its attempts and last outcome.
 */

export type DeliveryStatus = "pending" | "delivered" | "failed" | "dropped";

export async function readDeliveryState(
  sql: Db,
  id: number,
): Promise<{ attempts: number; status: DeliveryStatus } | null> {
  const [row] = await sql<{ attempts: number; status: DeliveryStatus }[]>`
    select attempts, status from webhook_deliveries where id = ${id}`;
  return row ?? null;
}

/** The same, locked until the transaction ends (waits for a transaction that is changing it). */
export async function lockDeliveryState(
  tx: Db,
  id: number,
): Promise<{ attempts: number; status: DeliveryStatus } | null> {
  const [row] = await tx<{ attempts: number; status: DeliveryStatus }[]>`
    select attempts, status from webhook_deliveries where id = ${id} for update`;
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
      last_duration_ms = ${o.durationMs}, finished_at = ${o.finishedAt}
    where id = ${id}`;
}

/** A counted attempt: what its request needs. */
export interface CountedAttempt {
  attempts: number;
  endpoint_id: string;
  url: string;
  secret: string;
  /** The secret before a rotation, while it still signs beside the new one. */
  previous_secret: string | null;
  event_id: string;
  type: string;
  livemode: boolean;
  data: unknown;
  created_at: Date;
}

/**
 * Counts the next attempt of a pending delivery (fewer than `maxAttempts` so far) whose endpoint still
 * exists and is enabled, and returns what its request needs; null otherwise.
 */
export async function countAttempt(tx: Db, id: number, maxAttempts: number): Promise<CountedAttempt | null> {
  const [row] = await tx<CountedAttempt[]>`
    update webhook_deliveries d set attempts = d.attempts + 1
    from events ev, webhook_endpoints e
    where d.id = ${id} and d.status = 'pending' and d.attempts < ${maxAttempts}
      and ev.id = d.event_id and e.id = d.endpoint_id and e.enabled
    returning d.attempts, d.endpoint_id, e.url, e.secret,
      case when e.previous_secret_expires_at > now() then e.previous_secret end as previous_secret,
      ev.id as event_id, ev.type, ev.livemode, ev.data, ev.created_at`;
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

/** The scope of an endpoint's delivery log (index webhook_deliveries_endpoint_created). */
export const deliveriesOf = (sql: Db, endpointId: string): Fragment => sql`endpoint_id = ${endpointId}`;

/** What the log reads; `id` uncast, so that a page orders by the number, not its text. */
export const deliveryLogColumns = (sql: Db): Fragment =>
  sql`id, event_id, endpoint_id, attempts, status, last_status, last_duration_ms, last_error, created_at`;

/**
 * A new delivery of an event to every enabled endpoint that receives it: the rule of the delivery
 * trigger (`webhook_endpoints_receiving`, sql/0015). Their first attempts' timers: `firstAttempts`.
 */
export function redeliverEventRows(
  sql: Db,
  event: { id: string; organization_id: string; livemode: boolean; type: string },
): Promise<DeliveryLogRow[]> {
  return sql<DeliveryLogRow[]>`
    insert into webhook_deliveries (event_id, endpoint_id)
    select ${event.id}, r.id
    from webhook_endpoints_receiving(${event.organization_id}, ${event.livemode}, ${event.type}) r
    order by r.id
    returning ${deliveryLogColumns(sql)}`;
}

/** The timers of the first attempts of these deliveries, due now, as rows for TimerScheduler.insertFrom. */
export const firstAttempts = (sql: Db, deliveryIds: readonly string[]): Fragment => sql`
  select 'webhook.deliver'::text as kind, now() as due_at, jsonb_build_object('deliveryId', d) as payload
  from unnest(${deliveryIds as string[]}::bigint[]) d`;
