import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { getCampaign } from "../../services/campaigns.ts";
import { CampaignIdParams, CampaignSchema } from "./schema.ts";

export function registerGetCampaign(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/campaigns/{id}",
    tags: ["Campaigns"],
    operationId: "getCampaign",
    summary: "Retrieve a campaign",
    description:
      "A campaign of the key's mode. A campaign of the other mode, or of another organization, is 404 `not_found`.",
    ...secretKeyAuth(deps, "campaigns:read"),
    request: { params: CampaignIdParams },
    responses: {
      200: { description: "The campaign.", content: { "application/json": { schema: CampaignSchema } } },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await getCampaign(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
