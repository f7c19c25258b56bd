import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { assertLivemodeMatches } from "../../lists/cursor.ts";
import { listCampaigns } from "../../services/campaigns.ts";
import { CampaignList, CampaignListQuery } from "./schema.ts";

export function registerListCampaigns(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/campaigns",
    tags: ["Campaigns"],
    operationId: "listCampaigns",
    summary: "List campaigns",
    description:
      "Campaigns of the key's mode only, newest first, cursor pagination (`limit`, `starting_after`). A " +
      "`livemode` value that differs from the key's mode is 400 `invalid_query`.",
    ...secretKeyAuth(deps, "campaigns:read"),
    request: { query: CampaignListQuery },
    responses: {
      200: { description: "A page of campaigns.", content: { "application/json": { schema: CampaignList } } },
      ...errorResponses("invalid_query", "invalid_cursor", "invalid_key", "missing_scope"),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    const q = c.req.valid("query");
    assertLivemodeMatches(q.livemode, auth.livemode);
    return c.json(await listCampaigns(deps, auth, q), 200);
  });
}
