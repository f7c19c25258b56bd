import { z } from "@hono/zod-openapi";
import { listEnvelope, listQuery } from "../../lists/cursor.ts";
import { EVENT_TYPES } from "../../services/events.ts";
import { WEBHOOK_URL_MAX } from "../../services/webhookUrls.ts";

const ENDPOINT_ID_EXAMPLE = "we_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

export const WebhookEndpointSchema = z
  .object({
    id: z.string().openapi({ example: ENDPOINT_ID_EXAMPLE }),
    url: z.string().openapi({ example: "https://example.com/webhooks" }),
    events: z.array(z.enum(EVENT_TYPES)).openapi({ description: "Event types sent to this endpoint." }),
    createdAt: z.string().openapi({ example: "2026-11-21T09:30:00.000Z" }),
  })
  .openapi("WebhookEndpoint", {
    description: "A webhook endpoint of the organization; it receives the events of both modes.",
  });

export const CreatedWebhookEndpointSchema = WebhookEndpointSchema.extend({
  secret: z.string().openapi({
    example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    description:
      "Signing secret (Standard Webhooks). Shown only in this answer: store it to verify `webhook-signature`.",
  }),
}).openapi("CreatedWebhookEndpoint");

export const WebhookEndpointListSchema = listEnvelope(WebhookEndpointSchema, "WebhookEndpointList");

export const WebhookEndpointListQuery = listQuery({});

export const WebhookEndpointIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: ENDPOINT_ID_EXAMPLE }),
});

export const DeletedWebhookEndpointSchema = z
  .object({ id: z.string().openapi({ example: ENDPOINT_ID_EXAMPLE }), deleted: z.literal(true) })
  .openapi("DeletedWebhookEndpoint");

export const WebhookEndpointInputSchema = z
  .object({
    url: z
      .string()
      .max(WEBHOOK_URL_MAX, { message: `must be at most ${WEBHOOK_URL_MAX} characters` })
      .openapi({
        example: "https://example.com/webhooks",
        description:
          "Where events are sent. `https:` to a public host (`http:` and private hosts only when the server " +
          "allows private webhook URLs).",
      }),
    events: z
      .array(z.enum(EVENT_TYPES, { error: `must be one of ${EVENT_TYPES.join(", ")}` }), {
        error: "must be an array of event types",
      })
      .min(1, { message: "must list at least one event type (omit it for all)" })
      .max(100, { message: "must list at most 100 event types" })
      .optional()
      .openapi({ description: "Event types to receive. Omitted: all of them, including types added later." }),
  })
  .strict()
  .openapi("WebhookEndpointInput");
