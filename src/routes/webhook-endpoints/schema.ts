import { z } from "@hono/zod-openapi";
import { listEnvelope, listQuery } from "../../lists/cursor.ts";
import { Timestamp } from "../../schemas.ts";
import { EVENT_TYPES } from "../../services/events.ts";
import { WEBHOOK_URL_MAX } from "../../services/webhookUrls.ts";

const ENDPOINT_ID_EXAMPLE = "we_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

export const WebhookEndpointSchema = z
  .object({
    id: z.string().openapi({ example: ENDPOINT_ID_EXAMPLE }),
    livemode: z.boolean().openapi({
      description:
        "The mode of the key that created it. A live endpoint receives every event of the organization, of " +
        "both modes (filter on the event's `livemode`); a test endpoint only events with `livemode` false.",
    }),
    url: z.string().openapi({ example: "https://example.com/webhooks" }),
    events: z.array(z.enum(EVENT_TYPES)).openapi({ description: "Event types sent to this endpoint." }),
    enabled: z.boolean().openapi({
      description: "A disabled endpoint receives nothing (and still counts toward the limit of 20).",
    }),
    createdAt: Timestamp,
  })
  .openapi("WebhookEndpoint", {
    description: "A webhook endpoint of the organization, seen and managed only by keys of its mode.",
  });

const secret = z.string().openapi({
  example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  description:
    "Signing secret (Standard Webhooks). Shown only in this answer: store it to verify `webhook-signature`.",
});

export const CreatedWebhookEndpointSchema = WebhookEndpointSchema.extend({ secret }).openapi(
  "CreatedWebhookEndpoint",
);

export const RotatedWebhookEndpointSchema = WebhookEndpointSchema.extend({
  secret,
  previousSecretExpiresAt: Timestamp.openapi({
    description:
      "Until then the secret this rotation replaced signs too: `webhook-signature` carries its signature " +
      "after the new one's, space-separated.",
  }),
}).openapi("RotatedWebhookEndpoint");

export const WebhookEndpointListSchema = listEnvelope(WebhookEndpointSchema, "WebhookEndpointList");

export const WebhookEndpointListQuery = listQuery({});

export const WebhookEndpointIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: ENDPOINT_ID_EXAMPLE }),
});

export const DeletedWebhookEndpointSchema = z
  .object({ id: z.string().openapi({ example: ENDPOINT_ID_EXAMPLE }), deleted: z.literal(true) })
  .openapi("DeletedWebhookEndpoint");

const Url = z
  .string()
  .max(WEBHOOK_URL_MAX, { message: `must be at most ${WEBHOOK_URL_MAX} characters` })
  .openapi({
    example: "https://example.com/webhooks",
    description:
      "Where events are sent. `https:` to a public host (`http:` and private hosts only when the server " +
      "allows private webhook URLs).",
  });

const EventTypes = z
  .array(z.enum(EVENT_TYPES, { error: `must be one of ${EVENT_TYPES.join(", ")}` }), {
    error: "must be an array of event types",
  })
  .min(1, { message: "must list at least one event type (omit it for all)" })
  .max(100, { message: "must list at most 100 event types" });

const Enabled = z
  .boolean()
  .openapi({ description: "false: the endpoint receives nothing until enabled again." });

export const WebhookEndpointInputSchema = z
  .object({
    url: Url,
    events: EventTypes.optional().openapi({
      description: "Event types to receive. Omitted: all of them, including types added later.",
    }),
    enabled: Enabled.optional().openapi({ description: "Default true." }),
  })
  .strict()
  .openapi("WebhookEndpointInput");

export const WebhookEndpointPatchSchema = z
  .object({
    url: Url,
    events: EventTypes.nullable().openapi({
      description: "Event types to receive; `null`: all of them again, including types added later.",
    }),
    enabled: Enabled,
  })
  .partial()
  .strict()
  .openapi("WebhookEndpointPatch");

export const DeliverySchema = z
  .object({
    id: z.string().openapi({ example: "whd_01JDQ8Y3M6K7T9PZ4XN2WB5RCE" }),
    eventId: z.string().openapi({ example: "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    endpointId: z.string().openapi({ example: ENDPOINT_ID_EXAMPLE }),
    attempt: z.number().int().openapi({ description: "Attempts made so far (0: not sent yet).", example: 2 }),
    status: z.enum(["pending", "succeeded", "failed"]).openapi({
      description:
        "`pending` while attempts remain (or one is under way), `succeeded` after a 2xx answer, `failed` when " +
        "every attempt failed or the endpoint was disabled before it could be sent.",
    }),
    responseStatus: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "HTTP status of the last attempt's answer; null without one.", example: 500 }),
    durationMs: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "How long the last attempt took, address lookup included.", example: 184 }),
    error: z
      .string()
      .nullable()
      .openapi({ description: "Why the last attempt failed.", example: "answered 500" }),
    createdAt: Timestamp,
  })
  .openapi("WebhookDelivery", { description: "One event sent to one endpoint, with its attempts." });

export const DeliveryListSchema = listEnvelope(DeliverySchema, "WebhookDeliveryList");

export const DeliveryListQuery = listQuery({});
