import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { liveKeyAuth } from "../../http/secretKey.ts";
import { assertLiveMode, listTasks } from "../../services/tasks.ts";
import { TaskSchema } from "./schema.ts";

export function registerListTasks(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/tasks",
    tags: ["Tasks"],
    operationId: "listTasks",
    summary: "List scheduled tasks",
    description:
      "Live keys only (a test key gets 403 `test_mode_not_supported`, whatever its scopes). The tasks still to " +
      "run, soonest first, " +
      "in this list's own format `{tasks: [...]}` (not the cursor convention yet).",
    ...liveKeyAuth(deps, "tasks:read", assertLiveMode),
    responses: {
      200: {
        description: "Scheduled tasks.",
        content: { "application/json": { schema: z.object({ tasks: z.array(TaskSchema) }) } },
      },
      ...errorResponses("invalid_key", "missing_scope", "test_mode_not_supported"),
    },
  });
  app.openapi(route, async (c) => c.json(await listTasks(deps, c.get("auth")), 200));
}
