import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { liveKeyAuth } from "../../http/secretKey.ts";
import { assertResultsKey, reportCallResults } from "../../services/callResults.ts";
import { CallIdParams, CallResultsInputSchema, CallSchema } from "./schema.ts";

export function registerReportCallResults(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/calls/{id}/results",
    tags: ["Calls"],
    operationId: "reportCallResults",
    summary: "Report the results of a live call",
    description:
      "For the voice agent dispatched to a live call (web or phone): what happened, reported once. Any of " +
      "`transcript`, `summary`, `collectedData`, `successful`, `outcome`, `recordingUrl`; a field left out (or " +
      "`null`) is not reported. Accepted once the call has started, while it is `ongoing` or after it ended; a " +
      "second report is 409 `results_already_reported`, a call that never started (`scheduled`, `initiated`, " +
      "`ringing`, or ended `busy`/`no_answer` without a start) is 409 `call_not_started`. A test key is 403 " +
      "`test_mode_not_supported` (whatever its scopes) before anything else is looked at: simulated calls make up their own " +
      "results.\n\n" +
      "Once the call has ended and its results exist, whichever comes last, `call.transcript_ready` (when " +
      "there is a transcript) and `call.analysis_ready` are sent, each once, and `GET /v1/calls/{id}/transcript` " +
      "answers. The body may be up to 1 MiB.",
    ...liveKeyAuth(deps, "calls:write", assertResultsKey),
    request: {
      params: CallIdParams,
      body: { required: true, content: { "application/json": { schema: CallResultsInputSchema } } },
    },
    responses: {
      200: {
        description: "The call, with its results.",
        content: { "application/json": { schema: CallSchema } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "missing_scope",
        "test_mode_not_supported",
        "not_found",
        "results_already_reported",
        "call_not_started",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const call = await reportCallResults(deps, c.get("auth"), c.req.valid("param").id, c.req.valid("json"));
    return c.json(call, 200);
  });
}
