import { z } from "@hono/zod-openapi";
import { enumFilter, listEnvelope, listQuery, livemodeParam } from "../../lists/cursor.ts";
import { FlatObjectSchema, PhoneSchema, Timestamp, UpdatedAt } from "../../schemas.ts";
import { CAMPAIGN_STATUSES } from "../../services/campaigns.ts";

const count = (description: string) => z.number().int().openapi({ description });

export const CampaignSchema = z
  .object({
    id: z.string().openapi({ example: "cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    livemode: z.boolean().openapi({ description: "false for test campaigns (simulated calls)." }),
    name: z.string().openapi({ example: "November reminders" }),
    agentId: z.string(),
    status: z.enum(CAMPAIGN_STATUSES).openapi({
      description:
        "`running` from creation; `completed` once every contact has been called and every call has ended; " +
        "`cancelled` after `POST /v1/campaigns/{id}/cancel` (calls in progress still finish and are counted).",
    }),
    concurrency: z
      .number()
      .int()
      .openapi({ description: "Most calls in progress at once (1–20).", example: 5 }),
    maxAttempts: z
      .number()
      .int()
      .openapi({ description: "Calls placed at most per contact (1–5).", example: 2 }),
    retryDelaySeconds: z.number().int().openapi({
      description:
        "Seconds after an unanswered call (busy, no_answer, failed) before the contact is called again.",
      example: 300,
    }),
    progress: z
      .object({
        total: count("Contacts of the campaign."),
        pending: count("Contacts not called yet (or waiting for a retry)."),
        inProgress: count("Contacts whose call is in progress; never more than `concurrency`."),
        completed: count("Contacts done: always `succeeded + failed`."),
        succeeded: count("Contacts whose call was answered (ended `completed`)."),
        failed: count(
          "Contacts not reached after `maxAttempts` calls, or refused by a calling rule (do-not-call list, " +
            "country), or left uncalled when the organization could call no more.",
        ),
        cancelled: count("Contacts never called because the campaign was cancelled."),
      })
      .openapi({
        description:
          "total = pending + inProgress + completed + cancelled. Only `pending` and `inProgress` ever go down.",
      }),
    createdAt: Timestamp,
    updatedAt: UpdatedAt,
    startedAt: Timestamp.nullable().openapi({ description: "When the first calls were started." }),
    completedAt: Timestamp.nullable().openapi({
      description: "When the campaign became `completed`; null while running and for cancelled campaigns.",
    }),
  })
  .openapi("Campaign");

export const CampaignIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
});

export const CampaignListQuery = listQuery({
  livemode: livemodeParam,
  status: enumFilter(CAMPAIGN_STATUSES, "Only campaigns in this status."),
});

export const CampaignList = listEnvelope(CampaignSchema, "CampaignList");

const CampaignContactInput = z
  .object({
    phone: PhoneSchema,
    name: z
      .string()
      .trim()
      .min(1, { message: "must not be empty" })
      .max(200, { message: "must be at most 200 characters" })
      .nullable()
      .optional()
      .openapi({ example: "Jeanne Martin" }),
    variables: FlatObjectSchema.optional().openapi({
      description: "Flat object passed to the call of this contact (like the `variables` of a call).",
      example: { firstName: "Jeanne" },
    }),
  })
  .strict()
  .openapi("CampaignContactInput");

export const CreateCampaignInput = z
  .object({
    name: z
      .string({ error: (iss) => (iss.input === undefined ? "is required" : "must be a string") })
      .trim()
      .min(1, { message: "must not be empty" })
      .max(200, { message: "must be at most 200 characters" })
      .openapi({ example: "November reminders" }),
    agentId: z
      .string({ error: (iss) => (iss.input === undefined ? "is required" : "must be a string") })
      .openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    contacts: z
      .array(CampaignContactInput, { error: "must be an array of contacts" })
      .min(1, { message: "must not be empty" })
      .optional()
      .openapi({ description: "The numbers to call, in order. Exactly one of `contacts` and `contactIds`." }),
    contactIds: z
      .array(z.string({ error: "must be contact ids" }), { error: "must be an array of contact ids" })
      .min(1, { message: "must not be empty" })
      .refine((ids) => new Set(ids).size === ids.length, { message: "must not repeat an id" })
      .optional()
      .openapi({
        description:
          "Contacts of the organization to call, in order. Exactly one of `contacts` and `contactIds`.",
        example: ["ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
        uniqueItems: true,
      }),
    concurrency: z
      .number({ error: "must be an integer from 1 to 20" })
      .int({ message: "must be an integer from 1 to 20" })
      .min(1, { message: "must be an integer from 1 to 20" })
      .max(20, { message: "must be an integer from 1 to 20" })
      .default(5)
      .openapi({ description: "Most calls in progress at once.", example: 5 }),
    maxAttempts: z
      .number({ error: "must be an integer from 1 to 5" })
      .int({ message: "must be an integer from 1 to 5" })
      .min(1, { message: "must be an integer from 1 to 5" })
      .max(5, { message: "must be an integer from 1 to 5" })
      .default(2)
      .openapi({
        description:
          "Calls placed at most per contact: a call that is not answered is retried until this number. " +
          "Simulated calls are always answered, so a test campaign never retries.",
        example: 2,
      }),
    retryDelaySeconds: z
      .number({ error: "must be an integer from 0 to 86400" })
      .int({ message: "must be an integer from 0 to 86400" })
      .min(0, { message: "must be an integer from 0 to 86400" })
      .max(86_400, { message: "must be an integer from 0 to 86400" })
      .default(300)
      .openapi({
        description:
          "Live campaigns: seconds after a call that ended `busy`, `no_answer` or `failed` before its contact is " +
          "called again (while attempts remain).",
        example: 300,
      }),
  })
  .strict()
  .superRefine((v, ctx) => {
    if ((v.contacts === undefined) === (v.contactIds === undefined)) {
      ctx.addIssue({
        code: "custom",
        message: "send exactly one of contacts and contactIds",
        path: [v.contacts === undefined ? "contacts" : "contactIds"],
      });
    }
  })
  .openapi("CreateCampaignRequest", { oneOf: [{ required: ["contacts"] }, { required: ["contactIds"] }] });
