import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { assertLivemodeMatches } from "../../lists/cursor.ts";
import { listEvents } from "../../services/events.ts";
import { EventListQuery, EventListSchema } from "./schema.ts";

export function registerListEvents(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/events",
    tags: ["Events"],
    operationId: "listEvents",
    summary: "List events",
    description:
      "Lists the events of the organization in the mode of the key (test keys see `livemode` false events only), " +
      "newest first, with the cursor convention. A `livemode` value other than the key's mode is 400 `invalid_query`. " +
      "A key restricted to some agents lists only the events whose object belongs to one of its agents (calls, " +
      "their transcripts and analyses, campaigns); the organization-wide events (`contact.*`, " +
      "`knowledge.document_ready`) need an unrestricted key.",
    ...secretKeyAuth(deps, "events:read"),
    request: { query: EventListQuery },
    responses: {
      200: {
        description: "One page of events.",
        content: { "application/json": { schema: EventListSchema } },
      },
      ...errorResponses("invalid_query", "invalid_cursor", "invalid_key", "missing_scope"),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    const query = c.req.valid("query");
    assertLivemodeMatches(query.livemode, auth.livemode);
    return c.json(await listEvents(deps, auth, query), 200);
  });
}
