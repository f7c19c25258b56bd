import { z } from "@hono/zod-openapi";
import { listEnvelope } from "../../lists/cursor.ts";
import { isCountryCode } from "../../phoneNumbers.ts";
import { PhoneSchema, Timestamp } from "../../schemas.ts";
import { ALL_DAYS, canonicalTimeZone, secondsOfDay } from "../../services/callWindow.ts";
import { Name, orgId } from "./fields.ts";

/** An organization as operators create, change and read it: its plan and its carrier settings. */

const PlanMinutes = z
  .number()
  .int()
  .min(0)
  .max(10_000_000)
  .openapi({ description: "Monthly allowance of live minutes.", example: 1000 });
const PaidPlan = z.boolean().openapi({ description: "Whether the organization has an active paid plan." });

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

const CallerNumber = PhoneSchema.nullable().openapi({
  description:
    "The number callees see (E.164). `null`: the environment's `LIVEKIT_SIP_FROM_NUMBER`, else the trunk's own.",
  example: "+33180000000",
});

const CountryCode = z
  .string()
  .transform((v, ctx) => {
    const code = v.trim().toUpperCase();
    if (!/^[A-Z]{2}$/.test(code) || !isCountryCode(code)) {
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
    .openapi({
      example: what === "start" ? "09:00" : "20:00",
      pattern:
        what === "start" ? "^([01][0-9]|2[0-3]):[0-5][0-9]$" : "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$",
    });

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
    // Left out: null, any time (services/organizations.ts). Not a schema default: a named schema
    // carries its default into every request that uses it, the organization's PATCH included.
    callWindow: carrierSettings.callWindow.optional(),
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
