import { z } from "@hono/zod-openapi";
import type { App } from "../../http/appEnv.ts";
import { Timestamp } from "../../schemas.ts";
import type { EventType } from "../../services/events.ts";
import { CallSchema, TranscriptSchema } from "../calls/schema.ts";
import { CampaignSchema } from "../campaigns/schema.ts";
import { ContactSchema, DeletedContactSchema } from "../contacts/schema.ts";
import { DocumentReadySchema } from "../knowledge-bases/schema.ts";

/**
 * The `webhooks` section of the OpenAPI document: what the service POSTs to webhook endpoints, one
 * entry per event type, with the payload of each (the objects the API returns) and the signature
 * headers. The API reference (/api/docs) lists them under "Webhooks".
 */

/** Each event type: its payload's object, its schema name and what emits it. */
const EVENTS: Record<EventType, { data: z.ZodType; name: string; when: string; orderBy?: string }> = {
  "call.started": {
    data: CallSchema,
    name: "CallStartedEvent",
    when: "A call became `ongoing` (simulated calls: 5 s after creation, scaled by the simulation speed).",
  },
  "call.ended": {
    data: CallSchema,
    name: "CallEndedEvent",
    when: "A call ended (`completed`, `failed`, `no_answer`, `busy` or `cancelled`).",
  },
  "call.transcript_ready": {
    data: TranscriptSchema,
    name: "CallTranscriptReadyEvent",
    when: "A call's transcript can be read (`GET /api/v1/calls/{id}/transcript`), after the call ended.",
  },
  "call.analysis_ready": {
    data: CallSchema,
    name: "CallAnalysisReadyEvent",
    when: "A call's summary, collected data and outcome are set, after the call ended.",
  },
  "campaign.started": { data: CampaignSchema, name: "CampaignStartedEvent", when: "A campaign was created." },
  "campaign.completed": {
    data: CampaignSchema,
    name: "CampaignCompletedEvent",
    when: "Every contact of a campaign was called (or counted failed).",
  },
  "campaign.cancelled": {
    data: CampaignSchema,
    name: "CampaignCancelledEvent",
    when: "A campaign was cancelled before its end.",
  },
  "contact.created": {
    data: ContactSchema,
    name: "ContactCreatedEvent",
    when: "A contact was created. With a test key too (`livemode` false): contacts are real in both modes.",
  },
  "contact.updated": {
    data: ContactSchema,
    name: "ContactUpdatedEvent",
    when: "A contact was changed. With a test key too (`livemode` false).",
  },
  "contact.deleted": {
    data: DeletedContactSchema,
    name: "ContactDeletedEvent",
    when: "A contact was deleted. With a test key too (`livemode` false).",
  },
  "knowledge.document_ready": {
    data: DocumentReadySchema,
    name: "DocumentReadyEvent",
    when: "A knowledge-base document was chunked and indexed (test mode: fictitious, nothing stored).",
    // A document has this one event and never changes.
    orderBy: "createdAt",
  },
};

const SignatureHeaders = z.object({
  "webhook-id": z.string().openapi({
    description: "The event's id, the same on every attempt and redelivery: ignore a repeat.",
    example: "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
  }),
  "webhook-timestamp": z
    .string()
    .openapi({ description: "Unix seconds of this attempt.", example: "1795598018" }),
  "webhook-signature": z.string().openapi({
    description:
      "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}` under the base64-decoded " +
      "part of the endpoint's secret after `whsec_` (Standard Webhooks). For 24 hours after a secret rotation, " +
      "two such signatures separated by a space (new secret first): accept either.",
    example: "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
  }),
});

/** How deliveries arrive, said on every webhook and on the Events tag (routes/docs/document.ts). */
export const DELIVERY_ORDER =
  "Deliveries are at least once and unordered: an event may arrive more than once (ignore a " +
  "`webhook-id` already processed: it is the event's id) and the events of one object in any order (a " +
  "call's `call.analysis_ready` before its `call.ended`, a contact's `contact.deleted` before its " +
  "`contact.updated`).";

export function registerWebhookDocs(app: App) {
  for (const [type, e] of Object.entries(EVENTS) as [EventType, (typeof EVENTS)[EventType]][]) {
    const payload = z
      .object({
        id: z.string().openapi({ example: "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
        type: z.literal(type),
        livemode: z.boolean().openapi({
          description:
            "false for test-key and simulated activity. A live endpoint receives both: filter on it.",
        }),
        createdAt: Timestamp,
        data: e.data,
      })
      .openapi(e.name);
    app.openAPIRegistry.registerWebhook({
      method: "post",
      path: type,
      tags: ["Events"],
      // `callStartedEvent`, …: stable names for generators, unique beside the API's operations.
      operationId: `${e.name[0]?.toLowerCase()}${e.name.slice(1)}`,
      summary: type,
      description:
        `${e.when} Sent to every enabled endpoint that subscribes to \`${type}\`: live endpoints receive the ` +
        `events of both modes, test endpoints only \`livemode\` false ones. ${DELIVERY_ORDER} To order ` +
        `them, \`data.${e.orderBy ?? "updatedAt"}\` is the time of the change this event reports, strictly ` +
        "increasing per object: keep the data with the latest one.",
      // The receiver authenticates the sender by the signature headers, not by a credential of this API.
      security: [],
      request: {
        headers: SignatureHeaders,
        body: { required: true, content: { "application/json": { schema: payload } } },
      },
      responses: {
        200: {
          description:
            "Any 2xx answer within 15 seconds acknowledges the event. Anything else (redirects included) is " +
            "retried 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h later.",
        },
      },
    });
  }
}
