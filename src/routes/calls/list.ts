import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import {
  assertLivemodeMatches,
  idFilter,
  listEnvelope,
  listQuery,
  livemodeParam,
} from "../../lists/cursor.ts";
import { CALL_STATUSES, listCalls } from "../../services/calls.ts";
import { CallSchema } from "./schema.ts";

const CallListQuery = listQuery({
  livemode: livemodeParam,
  status: z
    .enum(CALL_STATUSES, { message: `status must be one of ${CALL_STATUSES.join(", ")}` })
    .optional()
    .openapi({ param: { name: "status", in: "query" }, description: "Only calls in this status." }),
  agentId: idFilter("agt", "Only calls of this agent."),
  campaignId: idFilter("cmp", "Only calls of this campaign."),
});

export function registerListCalls(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/calls",
    tags: ["Calls"],
    operationId: "listCalls",
    summary: "List calls",
    description:
      "Calls of the key's mode only, newest first, cursor pagination (`limit`, `starting_after`). A `livemode` " +
      "value that differs from the key's mode is 400 `invalid_query`.",
    ...secretKeyAuth(deps, "calls:read"),
    request: { query: CallListQuery },
    responses: {
      200: {
        description: "A page of calls.",
        content: { "application/json": { schema: listEnvelope(CallSchema, "CallList") } },
      },
      ...errorResponses("invalid_query", "invalid_cursor", "invalid_key", "missing_scope"),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    const q = c.req.valid("query");
    assertLivemodeMatches(q.livemode, auth.livemode);
    return c.json(await listCalls(deps, auth, q), 200);
  });
}
