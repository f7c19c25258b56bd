import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { createCall } from "../../services/calls.ts";
import { CallSchema, CreateCallInput } from "./schema.ts";

export function registerCreateCall(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/calls",
    tags: ["Calls"],
    summary: "Create a call",
    description:
      "With a test key: a simulated call, answered 201 at once with `livemode` false; it then moves to `ringing` " +
      "(+2 s), `ongoing` (+5 s) and `completed` (`durationSeconds`, 30–89 s, later), delays multiplied by " +
      "`SIMULATION_TIME_SCALE`. `runAt`, the do-not-call list, call window, country and limits do not apply; " +
      "nothing is sent to a carrier and nothing counts in usage. Events: `call.started`, `call.ended`, " +
      "`call.transcript_ready`, `call.analysis_ready`.\n\n" +
      "With a live key: a paid plan is required (403 `plan_required`), then a carrier (503 " +
      "`carrier_unavailable`). A future `runAt` creates the call in status `scheduled` with a `taskId` " +
      "(see `GET /v1/tasks`).",
    ...secretKeyAuth(deps, "calls:write"),
    request: { body: { required: true, content: { "application/json": { schema: CreateCallInput } } } },
    responses: {
      201: { description: "The call.", content: { "application/json": { schema: CallSchema } } },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "missing_scope",
        "agent_not_allowed",
        "plan_required",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
        "agent_unavailable",
        "carrier_unavailable",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const call = await createCall(deps, c.get("auth"), c.req.valid("json"));
    return c.json(call, 201);
  });
}
