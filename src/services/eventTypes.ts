import type { EventType } from "./events.ts";

/** The event types of SPEC.md "Events" as a runtime list, for validating filters and subscriptions. */
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
] as const satisfies readonly EventType[];

// Fails to compile when EventType gains a member that this list lacks.
type Unlisted = Exclude<EventType, (typeof EVENT_TYPES)[number]>;
export const eventTypesComplete: [Unlisted] extends [never] ? true : never = true;
