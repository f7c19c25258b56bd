import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { liveKeyAuth } from "../../http/secretKey.ts";
import { assertLiveMode, deleteTask } from "../../services/tasks.ts";
import { DeletedTaskSchema } from "./schema.ts";

export function registerDeleteTask(app: App, deps: Deps) {
  const route = createRoute({
    method: "delete",
    path: "/api/v1/tasks/{id}",
    tags: ["Tasks"],
    operationId: "deleteTask",
    summary: "Cancel a scheduled task",
    description:
      "Live keys only (a test key gets 403 `test_mode_not_supported`, whatever its scopes, before the id is " +
      "looked at). Cancels the " +
      "task and its call (status `cancelled`). A task that already ran is 404 `not_found`.",
    ...liveKeyAuth(deps, "tasks:write", assertLiveMode),
    request: {
      params: z.object({
        id: z
          .string()
          .openapi({ param: { name: "id", in: "path" }, example: "task_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
      }),
    },
    responses: {
      200: {
        description: "Deleted.",
        content: {
          "application/json": {
            schema: DeletedTaskSchema,
          },
        },
      },
      ...errorResponses("invalid_key", "missing_scope", "test_mode_not_supported", "not_found"),
    },
  });
  app.openapi(route, async (c) =>
    c.json(await deleteTask(deps, c.get("auth"), c.req.valid("param").id), 200),
  );
}
