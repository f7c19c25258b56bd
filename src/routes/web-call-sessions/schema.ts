import { z } from "@hono/zod-openapi";
import { FlatObjectSchema, Timestamp } from "../../schemas.ts";
import { IDEMPOTENCY_KEY_PATTERN } from "../../services/sessionTokens.ts";

/** Request and response schemas of session tokens. */

/** `variables`: a flat object kept with the token and handed to the call, never to the browser. */
export const VariablesSchema = FlatObjectSchema.openapi({
  description:
    "Flat values kept with the call and passed to the agent; never sent to the browser. At most 50 keys " +
    "of at most 64 characters; values are strings (at most 1,000 characters), numbers, booleans or null.",
  example: { customerName: "Ada", orderId: 1042, vip: true },
});

export const CreateSessionBody = z
  .object({
    agentId: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    variables: VariablesSchema.optional(),
  })
  .strict()
  .openapi("WebCallSessionCreate");

export const SessionTokenSchema = z
  .object({
    token: z.string().openapi({
      description: "Single-use session token (`inf_wcs_…`). Returned once; only its hash is stored.",
      example: "inf_wcs_9fJ2kLmN0pQrStUvWxYz0123456789AbCdEfGhIjK",
    }),
    expiresAt: Timestamp.openapi({
      description: "Five minutes after issue (ISO 8601 UTC with milliseconds).",
      example: "2026-11-21T09:35:00.000Z",
    }),
    livemode: z.boolean().openapi({ description: "false when minted with a test key." }),
  })
  .openapi("WebCallSession");

export const IdempotencyHeaders = z.object({
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
