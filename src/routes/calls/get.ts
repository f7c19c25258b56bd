import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { getCall } from "../../services/calls.ts";
import { CallIdParams, CallSchema } from "./schema.ts";

export function registerGetCall(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/calls/{id}",
    tags: ["Calls"],
    operationId: "getCall",
    summary: "Retrieve a call",
    description:
      "A call of the key's mode. A call of the other mode, or of another organization, is 404 `not_found`.",
    ...secretKeyAuth(deps, "calls:read"),
    request: { params: CallIdParams },
    responses: {
      200: { description: "The call.", content: { "application/json": { schema: CallSchema } } },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await getCall(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
