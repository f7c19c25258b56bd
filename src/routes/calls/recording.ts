import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { getRecording } from "../../services/calls.ts";
import { CallIdParams, RecordingSchema } from "./schema.ts";

export function registerGetRecording(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/calls/{id}/recording",
    tags: ["Calls"],
    operationId: "getCallRecording",
    summary: "Retrieve the recording of a call",
    description:
      "Where the recording of a live call is, once its voice agent reported a `recordingUrl` (`POST " +
      "/v1/calls/{id}/results`); the call object's `recordingUrl` is the same URL. 404 `not_found` before " +
      "that, for a simulated call (it has no recording), and for a call of the other mode.",
    ...secretKeyAuth(deps, "calls:read"),
    request: { params: CallIdParams },
    responses: {
      200: { description: "The recording.", content: { "application/json": { schema: RecordingSchema } } },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await getRecording(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
