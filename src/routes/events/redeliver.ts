import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { BODY_ERRORS, errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth, UNRESTRICTED_NOTE, unrestrictedKey } from "../../http/secretKey.ts";
import { redeliverEvent } from "../../services/webhookEndpoints.ts";
import { DeliverySchema } from "../webhook-endpoints/schema.ts";

const EventIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
});

const RedeliveredSchema = z
  .object({
    eventId: z.string().openapi({ example: "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    deliveries: z
      .array(DeliverySchema)
      .openapi({ description: "The new deliveries, one per endpoint of the key's mode." }),
  })
  .openapi("Redelivery");

export function registerRedeliverEvent(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/events/{id}/redeliver",
    tags: ["Events"],
    operationId: "redeliverEvent",
    summary: "Send an event again",
    description:
      "Sends an event of the key's mode again: a new delivery (with attempts of its own) to every enabled " +
      "endpoint that receives the event and subscribes to its type today, as when it happened (a test event " +
      "reaches live endpoints too; the answer lists the deliveries to the endpoints of the key's mode only). The " +
      "same `webhook-id`: receivers that already processed it can tell. An " +
      `empty \`deliveries\` when no endpoint of the key's mode receives it. An event of the other mode is 404. ${UNRESTRICTED_NOTE}`,
    ...secretKeyAuth(deps, "webhooks:write", unrestrictedKey),
    request: { params: EventIdParams },
    responses: {
      200: {
        description: "The deliveries created.",
        content: { "application/json": { schema: RedeliveredSchema } },
      },
      ...errorResponses("invalid_key", "missing_scope", "agent_not_allowed", "not_found", ...BODY_ERRORS),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await redeliverEvent(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
