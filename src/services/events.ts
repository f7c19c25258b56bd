import { type CallRow, callView } from "../db/calls.ts";
import type { Db } from "../db/engine/connection.ts";
import { gathered } from "../db/engine/gathered.ts";
import { type Page, paginate } from "../db/engine/pages.ts";
import { type EventRow, eventsPage, insertEvents } from "../db/events.ts";
import type { Deps } from "../deps.ts";

/**
 * Events: written into the outbox by the transaction that made the change, so an event exists if and
 * only if its change does; delivered to webhook endpoints from there (services/webhookDelivery.ts) and
 * listed by `GET /v1/events` (the key's mode only).
 */

/** Every event type, as a runtime list, for validating filters and subscriptions. */
export const EVENT_TYPES = [
  "call.started",
  "call.ended",
  "call.transcript_ready",
  "call.analysis_ready",
  "campaign.started",
  "campaign.completed",
  "campaign.cancelled",
  "contact.created",
  "contact.updated",
  "contact.deleted",
  "knowledge.document_ready",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface NewEvent {
  /** An id drawn earlier, to place the event before others recorded meanwhile (default: drawn now). */
  id?: string;
  organizationId: string;
  /**
   * The agent the event's object belongs to (a call, its transcript or analysis, a campaign), so keys
   * restricted to some agents see only their events; null for the organization's own objects
   * (contacts, knowledge).
   */
  agentId: string | null;
  type: EventType;
  livemode: boolean;
  data: Record<string, unknown>;
}

/** A call event (`call.started`, `call.ended`, `call.analysis_ready`): its data is the call object. */
export function callEvent(
  type: "call.started" | "call.ended" | "call.analysis_ready",
  call: CallRow,
): NewEvent {
  return {
    organizationId: call.organization_id,
    agentId: call.agent_id,
    type,
    livemode: call.livemode,
    data: callView(call),
  };
}

/** Records an event with the transaction that made the change. Returns its id. */
export async function recordEvent(sql: Db, deps: EventDeps, e: NewEvent): Promise<string> {
  const [id] = await recordEvents(sql, deps, [e]);
  return id!;
}

/** What recording events needs: ids, the clock, and the timers (for the webhook deliveries they cause). */
export type EventDeps = Pick<Deps, "ids" | "clock" | "timers">;

/**
 * Records several events in one statement (a batch of timers moving many calls). Ids are drawn in the
 * order given, so the outbox keeps that order. The statement's trigger writes the webhook deliveries
 * and their timers, due at once; the timer runner is told to look for them shortly, so a delivery
 * leaves within tens of milliseconds of the commit rather than at the runner's next poll.
 */
export async function recordEvents(sql: Db, deps: EventDeps, events: readonly NewEvent[]): Promise<string[]> {
  const now = deps.clock.now();
  const rows = events.map((e) => ({
    id: e.id ?? deps.ids.next("evt"),
    organization_id: e.organizationId,
    agent_id: e.agentId,
    type: e.type,
    livemode: e.livemode,
    data: e.data,
    created_at: now,
  }));
  // The events of the jobs of a shared transaction go in one statement (db/engine/gathered.ts).
  await gathered(sql, "events", rows, async (tx, all) => {
    await insertEvents(tx, all);
    return all;
  });
  if (rows.length > 0) deps.timers.soon();
  return rows.map((r) => r.id);
}

export interface EventObject {
  id: string;
  type: EventType;
  livemode: boolean;
  createdAt: string;
  data: Record<string, unknown>;
}

export function eventView(
  r: Pick<EventRow, "id" | "type" | "livemode" | "data" | "created_at">,
): EventObject {
  return {
    id: r.id,
    type: r.type as EventType,
    livemode: r.livemode,
    createdAt: r.created_at.toISOString(),
    data: r.data,
  };
}

/**
 * The events of the key's organization and mode, newest first; a key restricted to some agents sees
 * only the events of their objects (organization-wide events, contacts and knowledge, need an
 * unrestricted key).
 */
export function listEvents(
  deps: Pick<Deps, "sql">,
  scope: { organizationId: string; livemode: boolean; agentIds: string[] | null },
  q: { limit: number; starting_after?: string | undefined; type?: EventType | undefined },
): Promise<Page<EventObject>> {
  return paginate<EventRow, EventObject>({ ...eventsPage(deps.sql, scope, q), map: eventView });
}
