import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { getTranscript } from "../../services/calls.ts";
import { CallIdParams, TranscriptSchema } from "./schema.ts";

export function registerGetTranscript(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/calls/{id}/transcript",
    tags: ["Calls"],
    operationId: "getCallTranscript",
    summary: "Retrieve the transcript of a call",
    description:
      "404 `not_found` until the transcript exists (a simulated call has one once `completed`; a live call once " +
      "it has ended and its voice agent reported one with `POST /v1/calls/{id}/results`), and for a call of the " +
      "other mode.",
    ...secretKeyAuth(deps, "calls:read"),
    request: { params: CallIdParams },
    responses: {
      200: { description: "The transcript.", content: { "application/json": { schema: TranscriptSchema } } },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await getTranscript(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
