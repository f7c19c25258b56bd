import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth, UNRESTRICTED_NOTE, unrestrictedKey } from "../../http/secretKey.ts";
import { updateWebhookEndpoint } from "../../services/webhookEndpoints.ts";
import { WebhookEndpointIdParams, WebhookEndpointPatchSchema, WebhookEndpointSchema } from "./schema.ts";

export function registerUpdateWebhookEndpoint(app: App, deps: Deps) {
  const route = createRoute({
    method: "patch",
    path: "/api/v1/webhook-endpoints/{id}",
    tags: ["Webhook endpoints"],
    operationId: "updateWebhookEndpoint",
    summary: "Update a webhook endpoint",
    description:
      "Changes any of `url`, `events` (`null`: every type) and `enabled`; fields left out keep their value. A " +
      "disabled endpoint receives nothing, not even the events that happen while it is disabled, and its " +
      `deliveries not yet sent are dropped. An endpoint of the other mode is 404. ${UNRESTRICTED_NOTE}`,
    ...secretKeyAuth(deps, "webhooks:write", unrestrictedKey),
    request: {
      params: WebhookEndpointIdParams,
      body: { required: true, content: { "application/json": { schema: WebhookEndpointPatchSchema } } },
    },
    responses: {
      200: {
        description: "The endpoint as changed.",
        content: { "application/json": { schema: WebhookEndpointSchema } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "missing_scope",
        "agent_not_allowed",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const endpoint = await updateWebhookEndpoint(
      deps,
      c.get("auth"),
      c.req.valid("param").id,
      c.req.valid("json"),
    );
    return c.json(endpoint, 200);
  });
}
