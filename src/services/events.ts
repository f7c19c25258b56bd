import type { Clock } from "../clock.ts";
import type { Db } from "../db/engine/connection.ts";
import { newId } from "../ids.ts";

/** Event types of SPEC.md "Events". */
export type EventType =
  | "call.started"
  | "call.ended"
  | "call.transcript_ready"
  | "call.analysis_ready"
  | "campaign.started"
  | "campaign.completed"
  | "campaign.cancelled"
  | "contact.created"
  | "contact.updated"
  | "contact.deleted"
  | "knowledge.document_ready";

export interface NewEvent {
  organizationId: string;
  type: EventType;
  livemode: boolean;
  data: Record<string, unknown>;
}

/**
 * Writes an event into the outbox. Call it with the transaction that made the change, so the
 * event exists if and only if the change does. Delivery to webhook endpoints reads the outbox.
 */
export async function recordEvent(sql: Db, clock: Clock, e: NewEvent): Promise<string> {
  const [id] = await recordEvents(sql, clock, [e]);
  return id!;
}

/**
 * Writes several events in one statement (a batch of timers moving many calls). Ids are drawn in the
 * order given, so the outbox keeps that order.
 */
export async function recordEvents(sql: Db, clock: Clock, events: readonly NewEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  const ids = events.map(() => newId("evt", clock));
  const now = clock.now();
  if (events.length === 1) {
    const e = events[0]!;
    await sql`
      insert into events (id, organization_id, type, livemode, data, created_at)
      values (${ids[0]!}, ${e.organizationId}, ${e.type}, ${e.livemode}, ${sql.json(e.data as never)}, ${now})`;
    return ids;
  }
  // Booleans travel as text: the driver writes a boolean[] parameter from JS booleans only.
  await sql`
    insert into events (id, organization_id, type, livemode, data, created_at)
    select id, org, type, livemode::boolean, data::jsonb, ${now}
    from unnest(${ids}::text[], ${events.map((e) => e.organizationId)}::text[], ${events.map((e) => e.type)}::text[],
      ${events.map((e) => String(e.livemode))}::text[], ${events.map((e) => JSON.stringify(e.data))}::text[])
      as v(id, org, type, livemode, data)`;
  return ids;
}
