import { z } from "@hono/zod-openapi";
import { SCOPES } from "../../auth/scopes.ts";
import { listEnvelope, queryValue } from "../../lists/cursor.ts";
import { Timestamp } from "../../schemas.ts";
import { agentId, keyId, orgId, start } from "./fields.ts";

/** Secret and publishable keys as operators create, list and revoke them, and a publishable key's abuse view. */

export const ScopeSchema = z.enum([...SCOPES, "*"]).openapi({ description: "A scope, or `*` for all." });
export type GrantedScope = z.infer<typeof ScopeSchema>;

export const SecretKeyInput = z
  .object({
    mode: z
      .enum(["live", "test"])
      .openapi({ description: "`live` keys act for real; `test` keys simulate." }),
    scopes: z
      .array(ScopeSchema)
      .min(1)
      .openapi({ example: ["webcalls:write", "calls:write"] }),
    agentIds: z
      .array(z.string())
      .min(1)
      .nullable()
      .optional()
      .openapi({
        description: "Restricts the key to these agents of the organization. Omitted or `null`: every agent.",
        example: ["agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
      }),
  })
  .strict()
  .openapi("CreateSecretKeyRequest");

/** An allowed website: an HTTPS origin, no wildcard, no path, query or credentials. Normalised to URL.origin. */
export const OriginSchema = z
  .string()
  .transform((value, ctx) => {
    let url: URL | null = null;
    try {
      url = new URL(value);
    } catch {}
    if (
      url?.protocol !== "https:" ||
      value.includes("*") ||
      url.username ||
      url.password ||
      url.pathname !== "/" ||
      url.search ||
      url.hash ||
      !/^https:\/\/[^/?#]+\/?$/i.test(value)
    ) {
      ctx.addIssue({
        code: "custom",
        message: `"${value}" is not an HTTPS origin such as https://www.example.com`,
      });
      return z.NEVER;
    }
    return url.origin;
  })
  .openapi({
    type: "string",
    description: "An HTTPS origin: scheme and host (and port), no wildcard, no path.",
    example: "https://www.example.com",
  });

export const PublishableKeyInput = z
  .object({
    agentId: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    allowedOrigins: z
      .array(OriginSchema)
      .min(1)
      .max(100)
      .openapi({ example: ["https://www.example.com", "https://shop.example.com"] }),
    monthlyMinuteCap: z.number().int().min(1).max(10_000_000).openapi({
      description: "Web call minutes this key may start per calendar month (UTC).",
      example: 500,
    }),
  })
  .strict()
  .openapi("CreatePublishableKeyRequest");

const secretKeyFields = {
  id: keyId,
  organizationId: orgId,
  mode: z.enum(["live", "test"]),
  scopes: z.array(ScopeSchema).openapi({ example: ["webcalls:write", "calls:write"] }),
  agentIds: z.array(z.string()).nullable().openapi({ description: "`null`: every agent.", example: null }),
  start,
  createdAt: Timestamp,
};

export const CreatedSecretKeySchema = z
  .object({
    ...secretKeyFields,
    key: z.string().openapi({
      description: "The secret key. Shown only in this answer: only its hash is stored.",
      example: "inf_test_4fT9…",
    }),
  })
  .openapi("CreatedSecretKey");

const summaryFields = {
  revoked: z.boolean(),
  revokedAt: Timestamp.nullable(),
  lastUsedAt: Timestamp.nullable().openapi({
    description: "When the key was last used (at most a minute behind); `null` if never.",
  }),
};

export const SecretKeySummarySchema = z
  .object({ ...secretKeyFields, ...summaryFields })
  .openapi("SecretKeySummary", { description: "A secret key as operators list it: never its value." });

export const SecretKeyListSchema = listEnvelope(SecretKeySummarySchema, "SecretKeyList");

export const RevokedSecretKeySchema = z
  .object({ ...secretKeyFields, revoked: z.literal(true), revokedAt: Timestamp })
  .openapi("RevokedSecretKey");

const publishableKeyFields = {
  id: keyId,
  organizationId: orgId,
  agentId,
  allowedOrigins: z.array(z.string()).openapi({ example: ["https://www.example.com"] }),
  monthlyMinuteCap: z.number().int().openapi({ example: 500 }),
  start,
  createdAt: Timestamp,
};

export const CreatedPublishableKeySchema = z
  .object({
    ...publishableKeyFields,
    key: z.string().openapi({
      description: "The publishable key. Shown only in this answer: only its hash is stored.",
      example: "inf_pub_7kQ2…",
    }),
  })
  .openapi("CreatedPublishableKey");

export const PublishableKeySummarySchema = z
  .object({
    ...publishableKeyFields,
    ...summaryFields,
    minutesUsedThisMonth: z.number().int().openapi({
      description: "Minutes counted on the key's cap this calendar month (UTC), running calls included.",
      example: 42,
    }),
  })
  .openapi("PublishableKeySummary", {
    description:
      "A publishable key as operators list it: never its value. Last use: its latest web call attempt.",
  });

export const PublishableKeyListSchema = listEnvelope(PublishableKeySummarySchema, "PublishableKeyList");

export const RevokedPublishableKeySchema = z
  .object({ ...publishableKeyFields, revoked: z.literal(true), revokedAt: Timestamp })
  .openapi("RevokedPublishableKey");

const DAYS_RE = /^[0-9]{1,3}$/;

/** `days` of the abuse view: 1–90, default 30. */
export const KeyStatsQuery = z
  .object({
    days: queryValue("an integer from 1 to 90")
      .optional()
      .transform((v, ctx) => {
        if (v === undefined) return 30;
        const n = DAYS_RE.test(v) ? Number(v) : Number.NaN;
        if (!Number.isInteger(n) || n < 1 || n > 90) {
          ctx.addIssue({ code: "custom", message: "must be an integer from 1 to 90" });
          return z.NEVER;
        }
        return n;
      })
      .openapi({
        param: { name: "days", in: "query" },
        type: "integer",
        minimum: 1,
        maximum: 90,
        default: 30,
        description: "How many days (UTC) to report, ending today. 1 to 90, default 30.",
      }),
  })
  .strict();

export const KeyStatsSchema = z
  .object({
    days: z
      .array(
        z.object({
          date: z.string().openapi({ format: "date", example: "2026-11-21" }),
          attempts: z.number().int().openapi({ description: "Web call attempts with the key.", example: 40 }),
          started: z.number().int().openapi({ description: "Attempts that started a call.", example: 12 }),
          refused: z.record(z.string(), z.number().int()).openapi({
            description: "Refused attempts by error code.",
            example: { origin_not_allowed: 20, invalid_captcha: 6, rate_limited: 2 },
          }),
          minutes: z.number().int().openapi({
            description:
              "Minutes of the calls started that day (reserved while they run, kept once they end).",
            example: 31,
          }),
        }),
      )
      .openapi({ description: "One entry per day, oldest first, days without attempts included." }),
    captchaScores: z
      .array(z.number().int())
      .length(11)
      .openapi({
        description:
          "How many bot check answers scored 0.0, 0.1 … 1.0 (to the nearest tenth) over the period.",
        example: [0, 9, 2, 0, 0, 1, 0, 3, 5, 8, 4],
      }),
    topRefusedOrigins: z
      .array(z.object({ origin: z.string(), count: z.number().int() }))
      .max(10)
      .openapi({
        description:
          "The `Origin` headers of the most refused attempts over the period, at most 10, most refused first. " +
          "`(none)`: no Origin header; `(other origins)`: beyond the 100 distinct origins kept per day.",
        example: [{ origin: "https://copycat.example.net", count: 20 }],
      }),
  })
  .openapi("PublishableKeyStats");
