import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth, UNRESTRICTED_NOTE, unrestrictedKey } from "../../http/secretKey.ts";
import { getWebhookEndpoint } from "../../services/webhookEndpoints.ts";
import { WebhookEndpointIdParams, WebhookEndpointSchema } from "./schema.ts";

export function registerGetWebhookEndpoint(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/webhook-endpoints/{id}",
    tags: ["Webhook endpoints"],
    operationId: "getWebhookEndpoint",
    summary: "Read a webhook endpoint",
    description: `Reads one endpoint of the key's mode (never its secret); one of the other mode is 404. ${UNRESTRICTED_NOTE}`,
    ...secretKeyAuth(deps, "webhooks:read", unrestrictedKey),
    request: { params: WebhookEndpointIdParams },
    responses: {
      200: {
        description: "The endpoint.",
        content: { "application/json": { schema: WebhookEndpointSchema } },
      },
      ...errorResponses("invalid_key", "missing_scope", "agent_not_allowed", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await getWebhookEndpoint(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
