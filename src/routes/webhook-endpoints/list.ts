import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth, UNRESTRICTED_NOTE, unrestrictedKey } from "../../http/secretKey.ts";
import { listWebhookEndpoints } from "../../services/webhookEndpoints.ts";
import { WebhookEndpointListQuery, WebhookEndpointListSchema } from "./schema.ts";

export function registerListWebhookEndpoints(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/webhook-endpoints",
    tags: ["Webhook endpoints"],
    operationId: "listWebhookEndpoints",
    summary: "List webhook endpoints",
    description:
      "Lists the organization's webhook endpoints of the key's mode, newest first, with the cursor convention. " +
      `Secrets are never listed. ${UNRESTRICTED_NOTE}`,
    ...secretKeyAuth(deps, "webhooks:read", unrestrictedKey),
    request: { query: WebhookEndpointListQuery },
    responses: {
      200: {
        description: "One page of webhook endpoints.",
        content: { "application/json": { schema: WebhookEndpointListSchema } },
      },
      ...errorResponses(
        "invalid_query",
        "invalid_cursor",
        "invalid_key",
        "missing_scope",
        "agent_not_allowed",
      ),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await listWebhookEndpoints(deps, c.get("auth"), c.req.valid("query")), 200);
  });
}
