import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { createWebhookEndpoint } from "../../services/webhookEndpoints.ts";
import { CreatedWebhookEndpointSchema, WebhookEndpointInputSchema } from "./schema.ts";

export function registerCreateWebhookEndpoint(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/webhook-endpoints",
    tags: ["Webhook endpoints"],
    summary: "Create a webhook endpoint",
    description:
      "Adds an endpoint that receives the organization's events (both modes; filter on `livemode`). The answer " +
      "carries the signing secret, shown this once.\n\n" +
      "Delivery: each event of a subscribed type is POSTed as JSON `{id, type, livemode, createdAt, data}` " +
      "with the Standard Webhooks headers `webhook-id` (the event id), `webhook-timestamp` (Unix seconds) and " +
      "`webhook-signature` (`v1,` then the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}` " +
      "under the base64-decoded part of the secret after `whsec_`). At least once: an answer other than 2xx " +
      "(redirects are not followed) or none within 15 s is retried 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and " +
      "10 h after the failure, then given up. Use `webhook-id` to ignore a repeat.",
    ...secretKeyAuth(deps, "webhooks:write"),
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
        "invalid_key",
        "missing_scope",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    const endpoint = await createWebhookEndpoint(deps, auth.organizationId, c.req.valid("json"), {
      allowPrivateUrls: deps.env.WEBHOOK_ALLOW_PRIVATE_URLS,
    });
    return c.json(endpoint, 201);
  });
}
