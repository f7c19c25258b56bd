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
    operationId: "createCampaign",
    summary: "Create a campaign",
    description:
      "Calls `contacts` (numbers given here) or `contactIds` (contacts of the organization), exactly one of " +
      "the two, keeping at most `concurrency` calls in progress.\n\n" +
      "With a test key: a free campaign with `livemode` false (no plan, no minutes), at most 100 contacts " +
      "(400 `test_campaign_too_large`); each contact is a simulated call (see `POST /v1/calls`) that always " +
      "ends answered, so no call is ever retried. Answered 201 with the first calls already started; " +
      "`campaign.started` now, `campaign.completed` when every call has ended.\n\n" +
      "With a live key: a paid plan is required (403 `plan_required`), then plan minutes left this month " +
      "(403 `plan_minutes_exhausted`), a carrier (503 `carrier_unavailable`) and an active agent (503 " +
      "`agent_unavailable`); nothing is written when one is missing. Each contact is then a live phone call " +
      "placed like `POST /v1/calls`, with every calling rule: a number on the do-not-call list or of a country " +
      "not allowed is never dialled (the contact fails at once, its call `failed` with that code as `outcome`); " +
      "a call that ends `busy`, `no_answer` or `failed` is retried `retryDelaySeconds` later while attempts " +
      "remain; outside the call window, or over the organization's hourly limit, the campaign waits, still " +
      "`running`, and goes on when it may; calls in progress never exceed `concurrency` nor the organization's " +
      "`maxConcurrentCalls`. Plan minutes all reserved by calls in progress (each phone call reserves up to an " +
      "hour's until it ends) make it wait for them to come back. When the plan minutes run out (none left and " +
      "none reserved) or the agent becomes inactive, the contacts not yet called fail with that code as their " +
      "call's `outcome`, and the campaign completes.\n\n" +
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
