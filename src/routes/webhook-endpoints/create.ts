import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth, UNRESTRICTED_NOTE, unrestrictedKey } from "../../http/secretKey.ts";
import { createWebhookEndpoint, MAX_ENDPOINTS } from "../../services/webhookEndpoints.ts";
import { CreatedWebhookEndpointSchema, WebhookEndpointInputSchema } from "./schema.ts";

export function registerCreateWebhookEndpoint(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/webhook-endpoints",
    tags: ["Webhook endpoints"],
    operationId: "createWebhookEndpoint",
    summary: "Create a webhook endpoint",
    description:
      "Adds an endpoint in the mode of the key. A live endpoint receives every event of the organization, of " +
      "both modes (filter on `livemode`; contact events from test-key writes are real changes); a test endpoint " +
      "receives only events with `livemode` false. The answer carries the signing secret, shown this once. At " +
      `most ${MAX_ENDPOINTS} endpoints per organization and mode, disabled ones included (400 ` +
      `\`too_many_endpoints\`). ${UNRESTRICTED_NOTE}\n\n` +
      "Delivery: each event of a subscribed type is POSTed as JSON `{id, type, livemode, createdAt, data}` " +
      "(the payloads are under `webhooks` in this document) with the Standard Webhooks headers `webhook-id` " +
      "(the event id), `webhook-timestamp` (Unix seconds) and `webhook-signature` (`v1,` then the base64 " +
      "HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}` under the base64-decoded part of the secret " +
      "after `whsec_`; for 24 hours after a rotation, one more such signature for each replaced secret, " +
      "separated by spaces). At least " +
      "once: an answer other than 2xx (redirects are not followed) or none within 15 s, the address lookup " +
      "included, is retried 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after the failure, then given up. " +
      "Use `webhook-id` to ignore a repeat.",
    ...secretKeyAuth(deps, "webhooks:write", unrestrictedKey),
    request: {
      body: { required: true, content: { "application/json": { schema: WebhookEndpointInputSchema } } },
    },
    responses: {
      201: {
        description: "The endpoint, with its secret.",
        content: { "application/json": { schema: CreatedWebhookEndpointSchema } },
      },
      ...errorResponses(
        "invalid_request",
        "too_many_endpoints",
        "invalid_key",
        "missing_scope",
        "agent_not_allowed",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await createWebhookEndpoint(deps, c.get("auth"), c.req.valid("json")), 201);
  });
}
