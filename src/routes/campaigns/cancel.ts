import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { BODY_ERRORS, errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { cancelCampaign } from "../../services/campaigns.ts";
import { CampaignIdParams, CampaignSchema } from "./schema.ts";

export function registerCancelCampaign(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/campaigns/{id}/cancel",
    tags: ["Campaigns"],
    operationId: "cancelCampaign",
    summary: "Cancel a campaign",
    description:
      "Stops a running campaign: status `cancelled`, contacts not yet called are never called (counted in " +
      "`progress.cancelled`), calls in progress finish and are counted in `completed`/`succeeded`. Emits " +
      "`campaign.cancelled` once. A campaign already `completed` or `cancelled` is answered 200 as it is, " +
      "unchanged, with no event. A campaign whose every call has already ended is answered `completed` " +
      "(`campaign.completed`) rather than cancelled. A campaign of the other mode is 404 `not_found`. No body.",
    ...secretKeyAuth(deps, "campaigns:write"),
    request: { params: CampaignIdParams },
    responses: {
      200: { description: "The campaign.", content: { "application/json": { schema: CampaignSchema } } },
      ...errorResponses("invalid_key", "missing_scope", "not_found", ...BODY_ERRORS),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await cancelCampaign(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
