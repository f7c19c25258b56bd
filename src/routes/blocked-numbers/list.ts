import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { assertLivemodeMatches } from "../../lists/cursor.ts";
import { listBlockedNumbers } from "../../services/blockedNumbers.ts";
import { BlockedNumberListQuery, BlockedNumberListSchema } from "./schema.ts";

export function registerListBlockedNumbers(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/blocked-numbers",
    tags: ["Blocked numbers"],
    operationId: "listBlockedNumbers",
    summary: "List blocked numbers",
    description:
      "The do-not-call list of the key's mode, newest first, with the cursor convention; `phone` finds one " +
      "number's entry. A `livemode` value that differs from the key's mode is 400 `invalid_query`.",
    ...secretKeyAuth(deps, "calls:read"),
    request: { query: BlockedNumberListQuery },
    responses: {
      200: {
        description: "One page of blocked numbers.",
        content: { "application/json": { schema: BlockedNumberListSchema } },
      },
      ...errorResponses("invalid_query", "invalid_cursor", "invalid_key", "missing_scope"),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    const q = c.req.valid("query");
    assertLivemodeMatches(q.livemode, auth.livemode);
    return c.json(await listBlockedNumbers(deps, auth, q), 200);
  });
}
