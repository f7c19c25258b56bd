import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { BODY_ERRORS, errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth, UNRESTRICTED_NOTE, unrestrictedKey } from "../../http/secretKey.ts";
import { MAX_PREVIOUS_SECRETS, rotateWebhookSecret } from "../../services/webhookEndpoints.ts";
import { RotatedWebhookEndpointSchema, WebhookEndpointIdParams } from "./schema.ts";

export function registerRotateWebhookSecret(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/webhook-endpoints/{id}/rotate-secret",
    tags: ["Webhook endpoints"],
    operationId: "rotateWebhookEndpointSecret",
    summary: "Rotate an endpoint's signing secret",
    description:
      "Issues a new signing secret, shown in this answer only. For 24 hours the previous secret keeps signing " +
      "beside it: `webhook-signature` carries both signatures, space-separated (`v1,<new> v1,<previous>`), so " +
      "a receiver can switch to the new secret without losing a delivery. Rotating again within those hours " +
      "does not shorten them: each replaced secret signs for its own 24 hours (newest first after the " +
      `current one; at most ${MAX_PREVIOUS_SECRETS} replaced secrets at a time). An endpoint of the other ` +
      `mode is 404. ${UNRESTRICTED_NOTE}`,
    ...secretKeyAuth(deps, "webhooks:write", unrestrictedKey),
    request: { params: WebhookEndpointIdParams },
    responses: {
      200: {
        description: "The endpoint with its new secret.",
        content: { "application/json": { schema: RotatedWebhookEndpointSchema } },
      },
      ...errorResponses("invalid_key", "missing_scope", "agent_not_allowed", "not_found", ...BODY_ERRORS),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await rotateWebhookSecret(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
