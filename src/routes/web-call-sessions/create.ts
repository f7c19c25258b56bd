import { createRoute, z } from "@hono/zod-openapi";
import { secretKeyAuth } from "../../auth/secretKey.ts";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import {
  type FlatVariables,
  IDEMPOTENCY_KEY_PATTERN,
  mintSessionToken,
  VariablesSchema,
} from "../../services/sessions.ts";

const CreateSessionBody = z
  .object({
    agentId: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    variables: VariablesSchema.optional(),
  })
  .strict()
  .openapi("WebCallSessionCreate");

const SessionTokenSchema = z
  .object({
    token: z.string().openapi({
      description: "Single-use session token (`inf_wcs_…`). Returned once; only its hash is stored.",
      example: "inf_wcs_9fJ2kLmN0pQrStUvWxYz0123456789AbCdEfGhIjK",
    }),
    expiresAt: z.string().openapi({
      description: "Five minutes after issue (ISO 8601 UTC with milliseconds).",
      example: "2026-11-21T09:35:00.000Z",
    }),
    livemode: z.boolean().openapi({ description: "false when minted with a test key." }),
  })
  .openapi("WebCallSession");

const IdempotencyHeaders = z.object({
  "idempotency-key": z
    .string()
    .regex(IDEMPOTENCY_KEY_PATTERN, "Idempotency-Key must be 1 to 255 printable ASCII characters")
    .optional()
    .openapi({
      param: { name: "idempotency-key", in: "header" },
      description:
        "Makes the request safe to retry for 24 hours, per organization and mode: the same key returns " +
        "the first answer (same token, same `expiresAt`) with `Idempotent-Replayed: true`, even if the " +
        "token has since been used or has expired. The same key with a different body is 409 " +
        "`idempotency_key_reused`. Only successful answers are kept.",
      example: "order-1042-call",
    }),
});

export function registerCreateWebCallSession(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/web-call-sessions",
    tags: ["Web calls"],
    summary: "Mint a session token",
    description:
      "Mints a single-use session token that starts one web call (`POST /api/v1/web-calls` with " +
      "`{sessionToken}`), so no key is placed in the page. The token is valid five minutes. Needs the " +
      "scope `webcalls:write`; a key restricted to certain agents can mint only for them. A live key needs " +
      "an active paid plan; a test key needs none and mints a token with `livemode` false, whose call is " +
      "simulated. Plan minutes are checked when the token is used, not here.",
    ...secretKeyAuth(deps.sql, "webcalls:write"),
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
      variables: body.variables as FlatVariables | undefined,
      idempotencyKey,
    });
    if (minted.replayed) c.header("Idempotent-Replayed", "true");
    return c.json({ token: minted.token, expiresAt: minted.expiresAt, livemode: minted.livemode }, 201);
  });
}
