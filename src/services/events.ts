import type { Clock } from "../clock.ts";
import type { Db } from "../db/connection.ts";
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

/**
 * Writes an event into the outbox. Call it with the transaction that made the change, so the
 * event exists if and only if the change does. Delivery to webhook endpoints reads the outbox.
 */
export async function recordEvent(
  sql: Db,
  clock: Clock,
  e: { organizationId: string; type: EventType; livemode: boolean; data: Record<string, unknown> },
): Promise<string> {
  const id = newId("evt", clock);
  await sql`
    insert into events (id, organization_id, type, livemode, data, created_at)
    values (${id}, ${e.organizationId}, ${e.type}, ${e.livemode}, ${sql.json(e.data as never)}, ${clock.now()})`;
  return id;
}
