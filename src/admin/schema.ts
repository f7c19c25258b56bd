import { z } from "@hono/zod-openapi";
import { SCOPES } from "../auth/scopes.ts";
import { type IdPrefix, isId } from "../ids.ts";
import { listEnvelope, listQuery, queryValue } from "../lists/cursor.ts";
import { E164, LanguageTagSchema, Timestamp } from "../schemas.ts";
import { ALL_DAYS, canonicalTimeZone, secondsOfDay } from "../services/callWindow.ts";
import { isKnownCountry } from "../services/phoneNumbers.ts";

/**
 * Request and response schemas of the operators' operations, shared by the admin API (which
 * documents them in the OpenAPI) and the CLI: one validation of operator input.
 */

/** Requests: all strict, an unknown field is an error. */
const Name = z.string().trim().min(1).max(200);
const PlanMinutes = z
  .number()
  .int()
  .min(0)
  .max(10_000_000)
  .openapi({ description: "Monthly allowance of live minutes.", example: 1000 });
const PaidPlan = z.boolean().openapi({ description: "Whether the organization has an active paid plan." });
const Language = LanguageTagSchema.openapi({
  description:
    "The language the agent speaks, a BCP 47 tag (canonicalised: `fr-ca` is stored as `fr-CA`). Simulated calls " +
    "play French content for `fr` and its regional variants, English for every other language.",
  example: "fr-CA",
});
export const INSTRUCTIONS_MAX = 20_000;
export const GREETING_MAX = 1_000;
const Instructions = z
  .string()
  .max(INSTRUCTIONS_MAX, { message: `must be at most ${INSTRUCTIONS_MAX.toLocaleString("en")} characters` })
  .nullable()
  .openapi({
    description: `What the voice agent is told to do (its prompt), at most ${INSTRUCTIONS_MAX.toLocaleString("en")} characters; \`null\` for none.`,
    example: "You answer calls for the Rivoli dental practice. Book appointments; never give medical advice.",
  });
const Greeting = z
  .string()
  .max(GREETING_MAX, { message: `must be at most ${GREETING_MAX.toLocaleString("en")} characters` })
  .nullable()
  .openapi({
    description: `The first sentence the agent says, at most ${GREETING_MAX.toLocaleString("en")} characters; \`null\` for none.`,
    example: "Hello, Rivoli dental practice, how can I help?",
  });
const KnowledgeBaseIds = z
  .array(z.string())
  .max(50, { message: "must hold at most 50 knowledge bases" })
  .transform((ids) => [...new Set(ids)])
  .openapi({
    description:
      "Knowledge bases of the organization the agent searches (duplicates are dropped). An unknown id, or one of " +
      "another organization, is 404 `not_found` with `param` `knowledgeBaseIds`.",
    example: ["kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
  });
const LivekitAgentName = Name.nullable().openapi({
  description: "Agent name dispatched on the media server; `null` means the agent id.",
  example: "reception-bot",
});

// ——— carrier settings of live phone calls ———

const SipTrunkId = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .nullable()
  .openapi({
    description:
      "The LiveKit outbound SIP trunk of the organization's live phone calls (`ST_…`). `null`: the " +
      "environment's `LIVEKIT_SIP_TRUNK_ID`. Without either, live phone calls answer 503 `carrier_unavailable`.",
    example: "ST_a1b2c3d4e5f6",
  });

const CallerNumber = z
  .string()
  .regex(E164, { message: "must be a phone number in E.164 format, such as +33612345678" })
  .nullable()
  .openapi({
    description:
      "The number callees see (E.164). `null`: the environment's `LIVEKIT_SIP_FROM_NUMBER`, else the trunk's own.",
    example: "+33180000000",
  });

const CountryCode = z
  .string()
  .transform((v, ctx) => {
    const code = v.trim().toUpperCase();
    if (!/^[A-Z]{2}$/.test(code) || !isKnownCountry(code)) {
      ctx.addIssue({
        code: "custom",
        message: `"${v}" is not an ISO 3166-1 alpha-2 country code such as FR`,
      });
      return z.NEVER;
    }
    return code;
  })
  .openapi({ type: "string", example: "FR" });

const AllowedCountries = z
  .array(CountryCode)
  .min(1, { message: "must list at least one country (null allows every country)" })
  .max(300)
  .transform((codes) => [...new Set(codes)].sort())
  .nullable()
  .openapi({
    description:
      "ISO 3166-1 alpha-2 codes of the countries live phone calls may reach; the country of a number is " +
      "found from its numbering plan. `null`: every country. Refused numbers: 403 `country_not_allowed`.",
    example: ["FR", "BE"],
  });

const TimeOfDay = (what: "start" | "end") =>
  z
    .string()
    .refine((v) => secondsOfDay(v, { endOfDay: what === "end" }) !== null, {
      message:
        what === "start"
          ? "must be a time of day HH:MM, 00:00 to 23:59"
          : "must be a time of day HH:MM, 00:00 to 23:59, or 24:00",
    })
    .openapi({ example: what === "start" ? "09:00" : "20:00" });

export const CallWindowSchema = z
  .object({
    start: TimeOfDay("start"),
    end: TimeOfDay("end"),
    timeZone: z
      .string()
      .transform((v, ctx) => {
        const zone = canonicalTimeZone(v);
        if (!zone) {
          ctx.addIssue({ code: "custom", message: `"${v}" is not an IANA time zone such as Europe/Paris` });
          return z.NEVER;
        }
        return zone;
      })
      .openapi({ type: "string", example: "Europe/Paris" }),
    days: z
      .array(z.number().int().min(1).max(7), { error: "must be an array of ISO weekdays, 1 (Monday) to 7" })
      .min(1, { message: "must list at least one day (a window that never opens is no window)" })
      .transform((d) => [...new Set(d)].sort((a, b) => a - b))
      .default([...ALL_DAYS])
      .openapi({
        description: "ISO weekdays, Monday = 1 … Sunday = 7. Default: all seven.",
        example: [1, 2, 3, 4, 5],
      }),
  })
  .strict()
  .refine((w) => secondsOfDay(w.start) !== secondsOfDay(w.end, { endOfDay: true }), {
    message: "must differ from start (a window of no time)",
    path: ["end"],
  })
  .nullable()
  .openapi("CallWindow", {
    description:
      "When live phone calls may start, in `timeZone`: from `start` to `end` on each of `days`. A window " +
      "whose `end` is before its `start` crosses midnight and belongs to the day it starts on; `end` " +
      '"24:00" means midnight. `null`: any time. Outside it: 403 `outside_call_window`.',
    example: { start: "09:00", end: "20:00", timeZone: "Europe/Paris", days: [1, 2, 3, 4, 5] },
  });

const MaxConcurrentCalls = z.number().int().min(1).max(1000).openapi({
  description: "Most live phone calls `initiated`, `ringing` or `ongoing` at once (1–1,000).",
  example: 10,
});
const MaxCallsPerHour = z.number().int().min(1).max(100_000).openapi({
  description: "Most live phone calls placed in any 60 minutes (1–100,000).",
  example: 100,
});

const carrierSettings = {
  sipTrunkId: SipTrunkId,
  callerNumber: CallerNumber,
  allowedCountries: AllowedCountries,
  callWindow: CallWindowSchema,
  maxConcurrentCalls: MaxConcurrentCalls,
  maxCallsPerHour: MaxCallsPerHour,
};

export const OrganizationInput = z
  .object({
    name: Name.openapi({ example: "Acme" }),
    paidPlan: PaidPlan.default(false),
    planMinutes: PlanMinutes.default(0),
    sipTrunkId: carrierSettings.sipTrunkId.default(null),
    callerNumber: carrierSettings.callerNumber.default(null),
    allowedCountries: carrierSettings.allowedCountries.default(null),
    callWindow: carrierSettings.callWindow.default(null),
    maxConcurrentCalls: carrierSettings.maxConcurrentCalls.default(10),
    maxCallsPerHour: carrierSettings.maxCallsPerHour.default(100),
  })
  .strict()
  .openapi("CreateOrganizationRequest");

/** No defaults here: a field left out of a PATCH keeps its value; `null` clears a setting. */
export const OrganizationPatch = z
  .object({
    name: Name.openapi({ example: "Acme Inc." }),
    paidPlan: PaidPlan,
    planMinutes: PlanMinutes,
    ...carrierSettings,
  })
  .partial()
  .strict()
  .openapi("UpdateOrganizationRequest");

export const AgentInput = z
  .object({
    name: Name.openapi({ example: "Reception" }),
    active: z.boolean().default(true),
    livekitAgentName: LivekitAgentName.optional(),
    language: Language.default("en"),
    instructions: Instructions.optional(),
    greeting: Greeting.optional(),
    knowledgeBaseIds: KnowledgeBaseIds.optional(),
  })
  .strict()
  .openapi("CreateAgentRequest");

export const AgentPatch = z
  .object({
    name: Name.openapi({ example: "Front desk" }),
    active: z.boolean(),
    livekitAgentName: LivekitAgentName,
    language: Language,
    instructions: Instructions,
    greeting: Greeting,
    knowledgeBaseIds: KnowledgeBaseIds,
  })
  .partial()
  .strict()
  .openapi("UpdateAgentRequest");

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

const KnowledgeBaseLanguage = LanguageTagSchema.nullable().openapi({
  description:
    "The language of the knowledge base's documents, a BCP 47 tag, or `null` for none. It decides how chunks are " +
    "indexed and searches parsed: `fr` (and `fr-…`) with the `french` text search configuration, `en` (and " +
    "`en-…`) with `english` (both stem words and drop stop words), any other language or none with `simple` " +
    "(words as written).",
  example: "fr",
});

export const KnowledgeBaseInput = z
  .object({ name: Name.openapi({ example: "FAQ" }), language: KnowledgeBaseLanguage.optional() })
  .strict()
  .openapi("CreateKnowledgeBaseRequest");

export const KnowledgeBasePatch = z
  .object({ name: Name.openapi({ example: "FAQ (2027)" }), language: KnowledgeBaseLanguage })
  .partial()
  .strict()
  .openapi("UpdateKnowledgeBaseRequest");

/** Responses: what the services return, documented. */

const orgId = z.string().openapi({ example: "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
const agentId = z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
const keyId = z.string().openapi({ example: "key_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
const start = z
  .string()
  .openapi({ description: "The visible start of the key, for operators.", example: "inf_test_Ab3x…" });

export const OrganizationSchema = z
  .object({
    id: orgId,
    name: z.string().openapi({ example: "Acme" }),
    paidPlan: z.boolean(),
    planMinutes: z.number().int().openapi({ example: 1000 }),
    sipTrunkId: z.string().nullable().openapi({ example: "ST_a1b2c3d4e5f6" }),
    callerNumber: z.string().nullable().openapi({ example: "+33180000000" }),
    allowedCountries: z
      .array(z.string())
      .nullable()
      .openapi({ description: "`null`: every country.", example: ["FR", "BE"] }),
    callWindow: z
      .object({ start: z.string(), end: z.string(), timeZone: z.string(), days: z.array(z.number().int()) })
      .nullable()
      .openapi({
        description: "`null`: any time.",
        example: { start: "09:00", end: "20:00", timeZone: "Europe/Paris", days: [1, 2, 3, 4, 5] },
      }),
    maxConcurrentCalls: z.number().int().openapi({ example: 10 }),
    maxCallsPerHour: z.number().int().openapi({ example: 100 }),
    createdAt: Timestamp,
  })
  .openapi("Organization");

export const OrganizationDetailsSchema = OrganizationSchema.extend({
  usage: z
    .object({
      month: z.string().openapi({ description: "The calendar month (UTC), `YYYY-MM`.", example: "2026-11" }),
      planMinutesUsed: z.number().int().openapi({
        description: "Plan minutes counted this month, including the reservations of calls still running.",
        example: 312,
      }),
    })
    .openapi({ description: "This month's use of the plan." }),
}).openapi("OrganizationDetails");

export const OrganizationListSchema = listEnvelope(OrganizationSchema, "OrganizationList");

export const AgentDetailsSchema = z
  .object({
    id: agentId,
    organizationId: orgId,
    name: z.string().openapi({ example: "Reception" }),
    active: z.boolean(),
    livekitAgentName: z.string().nullable().openapi({ example: null }),
    language: z.string().openapi({ example: "fr-CA" }),
    instructions: z.string().nullable(),
    greeting: z.string().nullable(),
    knowledgeBaseIds: z.array(z.string()).openapi({ example: ["kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"] }),
    createdAt: Timestamp,
  })
  .openapi("AgentDetails");

export const AgentDetailsListSchema = listEnvelope(AgentDetailsSchema, "AgentDetailsList");

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

export const KnowledgeBaseSchema = z
  .object({
    id: z.string().openapi({ example: "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    organizationId: orgId,
    name: z.string().openapi({ example: "FAQ" }),
    language: z.string().nullable().openapi({ example: "fr" }),
    createdAt: Timestamp,
  })
  .openapi("KnowledgeBase");

/** The query of an admin list: the cursor convention, no filter. */
export const AdminListQuery = listQuery({});

/**
 * The `{id}` path parameter. A malformed id is refused here (404 `not_found` through the
 * default hook) so it answers the same as an unknown one, whatever the body holds.
 */
export function idParams(prefix: IdPrefix, example: string) {
  return z.object({
    id: z
      .string()
      .refine((v) => isId(v, prefix), { message: "No such object." })
      .openapi({ param: { name: "id", in: "path" }, example }),
  });
}

/** The JSON request body of a route, required (a missing body is validated as `{}`). */
export function jsonRequest<T extends z.ZodType>(schema: T) {
  return { body: { required: true, content: { "application/json": { schema } } } } as const;
}

export const FailedTimerSchema = z
  .object({
    id: z.string().openapi({ example: "tmr_00000000000000000000000AZ7" }),
    kind: z.string().openapi({
      description:
        "What the work was: `webhook.deliver`, `call.simulation`, `campaign.advance`, `task.run` …",
      example: "task.run",
    }),
    object: z.string().nullable().openapi({
      description: "The object the work was about (a call, a campaign, a task, a webhook delivery …).",
      example: "task_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
    }),
    payload: z.record(z.string(), z.unknown()).openapi({ description: "What the work was given." }),
    status: z.enum(["failed", "pending"]).openapi({ description: "`pending` once retried." }),
    attempts: z.number().int().openapi({ description: "Attempts made (0 once retried).", example: 10 }),
    lastError: z.string().nullable().openapi({ example: "connect ECONNREFUSED 10.0.0.5:7880" }),
    createdAt: Timestamp,
    failedAt: Timestamp.nullable().openapi({ description: "When its last attempt failed." }),
  })
  .openapi("FailedTimer", {
    description: "Work that gave up: a durable timer whose handler failed until its retries ran out.",
  });

export const FailedTimerListSchema = listEnvelope(FailedTimerSchema, "FailedTimerList");

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
