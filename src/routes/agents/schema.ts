import { z } from "@hono/zod-openapi";

export const AgentSchema = z
  .object({
    id: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    name: z.string().openapi({ example: "Reception" }),
    active: z.boolean(),
  })
  .openapi("Agent");
