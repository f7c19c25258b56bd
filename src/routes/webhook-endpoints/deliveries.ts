import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth, UNRESTRICTED_NOTE, unrestrictedKey } from "../../http/secretKey.ts";
import { listEndpointDeliveries } from "../../services/webhookEndpoints.ts";
import { DeliveryListQuery, DeliveryListSchema, WebhookEndpointIdParams } from "./schema.ts";

export function registerListDeliveries(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/webhook-endpoints/{id}/deliveries",
    tags: ["Webhook endpoints"],
    operationId: "listWebhookEndpointDeliveries",
    summary: "List an endpoint's deliveries",
    description:
      "The delivery log of one endpoint, newest first, with the cursor convention: each event sent to it (a " +
      "redelivery is a delivery of its own) with its attempts so far, its status and how its last attempt " +
      "went. Deliveries are kept as long as events (the server's retention, 30 days by default). An endpoint " +
      `of the other mode is 404. ${UNRESTRICTED_NOTE}`,
    ...secretKeyAuth(deps, "webhooks:read", unrestrictedKey),
    request: { params: WebhookEndpointIdParams, query: DeliveryListQuery },
    responses: {
      200: {
        description: "One page of deliveries.",
        content: { "application/json": { schema: DeliveryListSchema } },
      },
      ...errorResponses(
        "invalid_query",
        "invalid_cursor",
        "invalid_key",
        "missing_scope",
        "agent_not_allowed",
        "not_found",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const page = await listEndpointDeliveries(
      deps,
      c.get("auth"),
      c.req.valid("param").id,
      c.req.valid("query"),
    );
    return c.json(page, 200);
  });
}
