import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { createCampaign } from "../../services/campaigns.ts";
import { CampaignSchema, CreateCampaignInput } from "./schema.ts";

export function registerCreateCampaign(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/campaigns",
    tags: ["Campaigns"],
    summary: "Create a campaign",
    description:
      "Calls `contacts` (numbers given here) or `contactIds` (contacts of the organization), exactly one of " +
      "the two, keeping at most `concurrency` calls in progress.\n\n" +
      "With a test key: a free campaign with `livemode` false (no plan, no minutes), at most 100 contacts " +
      "(400 `test_campaign_too_large`); each contact is a simulated call (see `POST /v1/calls`) that always " +
      "ends answered, so no call is ever retried. Answered 201 with the first calls already started; " +
      "`campaign.started` now, `campaign.completed` when every call has ended.\n\n" +
      "With a live key: a paid plan is required (403 `plan_required`), then plan minutes left this month " +
      "(403 `plan_minutes_exhausted`), then a carrier (503 `carrier_unavailable`); nothing is written.\n\n" +
      "An unknown or foreign `agentId` or contact id is 404 `not_found` with `param` naming it.",
    ...secretKeyAuth(deps, "campaigns:write"),
    request: { body: { required: true, content: { "application/json": { schema: CreateCampaignInput } } } },
    responses: {
      201: {
        description: "The campaign, running.",
        content: { "application/json": { schema: CampaignSchema } },
      },
      ...errorResponses(
        "invalid_request",
        "test_campaign_too_large",
        "invalid_key",
        "missing_scope",
        "agent_not_allowed",
        "plan_required",
        "plan_minutes_exhausted",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
        "agent_unavailable",
        "carrier_unavailable",
      ),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await createCampaign(deps, c.get("auth"), c.req.valid("json")), 201);
  });
}
