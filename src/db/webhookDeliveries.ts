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
  o: { status: DeliveryStatus; lastStatus: number | null; lastError: string | null; finishedAt: Date | null },
): Promise<void> {
  await tx`
    update webhook_deliveries
    set status = ${o.status}, last_status = ${o.lastStatus}, last_error = ${o.lastError}, finished_at = ${o.finishedAt}
    where id = ${id}`;
}

/** A counted attempt: what its request needs. */
export interface CountedAttempt {
  attempts: number;
  endpoint_id: string;
  url: string;
  secret: string;
  event_id: string;
  type: string;
  livemode: boolean;
  data: unknown;
  created_at: Date;
}

/**
 * Counts the next attempt of a pending delivery (fewer than `maxAttempts` so far) whose endpoint still
 * exists, and returns what its request needs; null otherwise.
 */
export async function countAttempt(tx: Db, id: number, maxAttempts: number): Promise<CountedAttempt | null> {
  const [row] = await tx<CountedAttempt[]>`
    update webhook_deliveries d set attempts = d.attempts + 1
    from events ev, webhook_endpoints e
    where d.id = ${id} and d.status = 'pending' and d.attempts < ${maxAttempts}
      and ev.id = d.event_id and e.id = d.endpoint_id
    returning d.attempts, d.endpoint_id, e.url, e.secret, ev.id as event_id, ev.type, ev.livemode, ev.data,
      ev.created_at`;
  return row ?? null;
}

/**
 * Ends a pending delivery that cannot be attempted: `dropped` when its endpoint was deleted, `failed`
 * when its last attempt's outcome was never written.
 */
export async function endUncountedDelivery(tx: Db, id: number): Promise<void> {
  await tx`
    update webhook_deliveries
    set status = case when exists (select from webhook_endpoints where id = endpoint_id) then 'failed'
      else 'dropped' end,
      finished_at = now()
    where id = ${id} and status = 'pending'`;
}
