import { z } from "@hono/zod-openapi";
import { Timestamp } from "../../schemas.ts";

/** The agent object: what a voice agent reads at the start of a call, and what lists show. */
export const AgentSchema = z
  .object({
    id: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    name: z.string().openapi({ example: "Reception" }),
    active: z.boolean().openapi({ description: "An inactive agent takes no new call." }),
    language: z
      .string()
      .openapi({ description: "The language the agent speaks, a BCP 47 tag.", example: "fr-CA" }),
    instructions: z.string().nullable().openapi({
      description: "What the agent is told to do (its prompt), at most 20,000 characters.",
      example:
        "You answer calls for the Rivoli dental practice. Book appointments; never give medical advice.",
    }),
    greeting: z.string().nullable().openapi({
      description: "The first sentence the agent says, at most 1,000 characters.",
      example: "Bonjour, cabinet dentaire Rivoli, que puis-je pour vous ?",
    }),
    knowledgeBaseIds: z.array(z.string()).openapi({
      description: "Knowledge bases the agent searches (`GET /v1/knowledge-bases/{id}/search`).",
      example: ["kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
    }),
    livekitAgentName: z.string().nullable().openapi({
      description: "The agent name dispatched on the media server; `null`: the agent id is dispatched.",
      example: null,
    }),
    createdAt: Timestamp,
  })
  .openapi("Agent");

export const AgentIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
});
