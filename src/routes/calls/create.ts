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
    operationId: "createCall",
    summary: "Create a call",
    description:
      "With a test key: a simulated call, answered 201 at once with `livemode` false; it then moves to `ringing` " +
      "(+2 s), `ongoing` (+5 s) and `completed` (`durationSeconds`, 30–89 s, later), delays multiplied by " +
      "`SIMULATION_TIME_SCALE`. `runAt`, the do-not-call list, call window, country and limits do not apply; " +
      "nothing is sent to a carrier and nothing counts in usage. Events: `call.started`, `call.ended`, " +
      "`call.transcript_ready`, `call.analysis_ready`.\n\n" +
      "With a live key: a phone call through the organization's carrier (LiveKit SIP). Checks, in this order, " +
      "each refusal writing nothing: the agent (404), the key's agent restriction (403 `agent_not_allowed`), " +
      "a paid plan (403 `plan_required`), plan minutes left (403 `plan_minutes_exhausted`), a carrier " +
      "(503 `carrier_unavailable`: LiveKit and an outbound SIP trunk), the agent active (503 " +
      "`agent_unavailable`), the do-not-call list (403 `number_blocked`), the number's country (403 " +
      "`country_not_allowed`), the call window (403 `outside_call_window`, naming the next opening), calls " +
      "in progress (429 `concurrency_limit_reached`) and calls placed in the last 60 minutes (429 " +
      "`hourly_limit_reached`, with `Retry-After`). Then 201 with the call `initiated`, `direction` " +
      "`outbound`: `maxSeconds` = min(3,600, remaining plan minutes × 60) are reserved, and the call is " +
      "dialled right after the answer (`ringing` while the phone rings, then `ongoing` with `call.started`, " +
      "or `busy`, `no_answer`, `failed` with `call.ended`; see the README for each status).\n\n" +
      "A future `runAt` runs the same checks up to the call window, judged at `runAt`, and creates the call in " +
      "status `scheduled` with a `taskId` (see `GET /v1/tasks`); when the task fires every check runs again, " +
      "and a refusal ends the call `failed` with the refusal's code as `outcome`.",
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
        "plan_minutes_exhausted",
        "number_blocked",
        "country_not_allowed",
        "outside_call_window",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
        "concurrency_limit_reached",
        "hourly_limit_reached",
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
