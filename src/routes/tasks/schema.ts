import { z } from "@hono/zod-openapi";
import { Timestamp } from "../../schemas.ts";

export const TaskSchema = z
  .object({
    id: z.string().openapi({ example: "task_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    type: z.enum(["call"]),
    callId: z.string(),
    agentId: z.string(),
    to: z.string().openapi({ example: "+33612345678" }),
    runAt: Timestamp.openapi({ example: "2026-11-22T09:30:00.000Z" }),
    status: z.enum(["scheduled", "completed", "cancelled"]),
    createdAt: Timestamp,
  })
  .openapi("Task");

export const DeletedTaskSchema = z
  .object({ id: z.string(), deleted: z.literal(true) })
  .openapi("DeletedTask");
