import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import type { FlatObject } from "../../schemas.ts";
import { mintSessionToken } from "../../services/sessionTokens.ts";
import { CreateSessionBody, IdempotencyHeaders, SessionTokenSchema } from "./schema.ts";

export function registerCreateWebCallSession(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/web-call-sessions",
    tags: ["Web calls"],
    operationId: "mintWebCallSession",
    summary: "Mint a session token",
    description:
      "Mints a single-use session token that starts one web call (`POST /api/v1/web-calls` with " +
      "`{sessionToken}`), so no key is placed in the page. The token is valid five minutes. Needs the " +
      "scope `webcalls:write`; a key restricted to certain agents can mint only for them. A live key needs " +
      "an active paid plan; a test key needs none and mints a token with `livemode` false, whose call is " +
      "simulated. Plan minutes are checked when the token is used, not here.",
    ...secretKeyAuth(deps, "webcalls:write"),
    request: {
      headers: IdempotencyHeaders,
      body: { required: true, content: { "application/json": { schema: CreateSessionBody } } },
    },
    responses: {
      201: {
        description: "The token, shown only in this answer (and in replays with the same Idempotency-Key).",
        headers: z.object({
          "Idempotent-Replayed": z
            .literal("true")
            .optional()
            .openapi({ description: "Present when the answer replays an earlier request." }),
        }),
        content: { "application/json": { schema: SessionTokenSchema } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "missing_scope",
        "agent_not_allowed",
        "plan_required",
        "not_found",
        "idempotency_key_reused",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const body = c.req.valid("json");
    const { "idempotency-key": idempotencyKey } = c.req.valid("header");
    const minted = await mintSessionToken(deps, c.get("auth"), {
      agentId: body.agentId,
      variables: body.variables as FlatObject | undefined,
      idempotencyKey,
    });
    if (minted.replayed) c.header("Idempotent-Replayed", "true");
    return c.json({ token: minted.token, expiresAt: minted.expiresAt, livemode: minted.livemode }, 201);
  });
}
