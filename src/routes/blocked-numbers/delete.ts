import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { unblockNumber } from "../../services/blockedNumbers.ts";
import { BlockedNumberIdParams, DeletedBlockedNumberSchema } from "./schema.ts";

export function registerDeleteBlockedNumber(app: App, deps: Deps) {
  const route = createRoute({
    method: "delete",
    path: "/api/v1/blocked-numbers/{id}",
    tags: ["Blocked numbers"],
    operationId: "deleteBlockedNumber",
    summary: "Unblock a number",
    description:
      "Removes the entry: the number may be called again. An entry of the other mode is 404 `not_found`.",
    ...secretKeyAuth(deps, "calls:write"),
    request: { params: BlockedNumberIdParams },
    responses: {
      200: {
        description: "The entry was removed.",
        content: { "application/json": { schema: DeletedBlockedNumberSchema } },
      },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await unblockNumber(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
