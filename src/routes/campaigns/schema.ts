import { z } from "@hono/zod-openapi";
import { CAMPAIGN_STATUSES } from "../../db/campaigns.ts";
import { enumFilter, listEnvelope, listQuery, livemodeParam } from "../../lists/cursor.ts";

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
    progress: z
      .object({
        total: count("Contacts of the campaign."),
        pending: count("Contacts not called yet (or waiting for a retry)."),
        inProgress: count("Contacts whose call is in progress; never more than `concurrency`."),
        completed: count("Contacts done: always `succeeded + failed`."),
        succeeded: count("Contacts whose call was answered."),
        failed: count("Contacts not reached after `maxAttempts` calls."),
        cancelled: count("Contacts never called because the campaign was cancelled."),
      })
      .openapi({
        description:
          "total = pending + inProgress + completed + cancelled. Only `pending` and `inProgress` ever go down.",
      }),
    createdAt: z.string().openapi({ example: "2026-11-21T09:30:00.000Z" }),
    startedAt: z.string().nullable().openapi({ description: "When the first calls were started." }),
    completedAt: z.string().nullable().openapi({
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
