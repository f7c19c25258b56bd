import { z } from "@hono/zod-openapi";
import { enumFilter, listEnvelope, listQuery, livemodeParam } from "../../lists/cursor.ts";
import { Timestamp } from "../../schemas.ts";
import { EVENT_TYPES } from "../../services/events.ts";

export const EventTypeSchema = z.enum(EVENT_TYPES).openapi("EventType");

export const EventSchema = z
  .object({
    id: z.string().openapi({ example: "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    type: EventTypeSchema,
    livemode: z.boolean().openapi({
      description:
        "false for events caused by test keys or simulated activity (contact writes with a test key too).",
    }),
    createdAt: Timestamp,
    data: z.record(z.string(), z.unknown()).openapi({
      description:
        "The object: the call, transcript, campaign or contact (`{id, deleted: true}` for `contact.deleted`), " +
        "or `{documentId, knowledgeBaseId, chunkCount, livemode}` for `knowledge.document_ready`.",
    }),
  })
  .openapi("Event");

export const EventListSchema = listEnvelope(EventSchema, "EventList");

export const EventListQuery = listQuery({
  livemode: livemodeParam,
  type: enumFilter(EVENT_TYPES, "Only events of this type."),
});
