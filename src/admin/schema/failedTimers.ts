import { z } from "@hono/zod-openapi";
import { listEnvelope } from "../../lists/cursor.ts";
import { Timestamp } from "../../schemas.ts";

/** Work that gave up, as operators list and retry it. */

export const FailedTimerSchema = z
  .object({
    id: z.string().openapi({ example: "tmr_01JDQ8Y3M6Q3VH8G2TD5KX7NAF" }),
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
