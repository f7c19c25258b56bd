import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth, UNRESTRICTED_NOTE, unrestrictedKey } from "../../http/secretKey.ts";
import { deleteWebhookEndpoint } from "../../services/webhookEndpoints.ts";
import { DeletedWebhookEndpointSchema, WebhookEndpointIdParams } from "./schema.ts";

export function registerDeleteWebhookEndpoint(app: App, deps: Deps) {
  const route = createRoute({
    method: "delete",
    path: "/api/v1/webhook-endpoints/{id}",
    tags: ["Webhook endpoints"],
    operationId: "deleteWebhookEndpoint",
    summary: "Delete a webhook endpoint",
    description:
      "Removes the endpoint: no event is sent to it any more (deliveries not yet sent are dropped). An endpoint " +
      `of the other mode is 404. ${UNRESTRICTED_NOTE}`,
    ...secretKeyAuth(deps, "webhooks:write", unrestrictedKey),
    request: { params: WebhookEndpointIdParams },
    responses: {
      200: {
        description: "The endpoint was deleted.",
        content: { "application/json": { schema: DeletedWebhookEndpointSchema } },
      },
      ...errorResponses("invalid_key", "missing_scope", "agent_not_allowed", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await deleteWebhookEndpoint(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
