import { z } from "@hono/zod-openapi";
import { listEnvelope } from "../../lists/cursor.ts";
import { LanguageTagSchema, Timestamp } from "../../schemas.ts";
import { agentId, Name, orgId } from "./fields.ts";

/** An agent as operators create, change and read it. */

const Language = LanguageTagSchema.openapi({
  description:
    "The language the agent speaks, a BCP 47 tag (canonicalised: `fr-ca` is stored as `fr-CA`). Simulated calls " +
    "play French content for `fr` and its regional variants, English for every other language.",
  example: "fr-CA",
});
/** "" means none, as the command line's `--instructions ""` does: the API and the CLI store the same. */
const emptyAsNull = (value: string | null) => (value === "" ? null : value);

export const INSTRUCTIONS_MAX = 20_000;
export const GREETING_MAX = 1_000;
const Instructions = z
  .string()
  .max(INSTRUCTIONS_MAX, { message: `must be at most ${INSTRUCTIONS_MAX.toLocaleString("en")} characters` })
  .nullable()
  .transform(emptyAsNull)
  .openapi({
    description: `What the voice agent is told to do (its prompt), at most ${INSTRUCTIONS_MAX.toLocaleString("en")} characters; \`null\` for none (an empty string is stored as \`null\`).`,
    example: "You answer calls for the Rivoli dental practice. Book appointments; never give medical advice.",
  });
const Greeting = z
  .string()
  .max(GREETING_MAX, { message: `must be at most ${GREETING_MAX.toLocaleString("en")} characters` })
  .nullable()
  .transform(emptyAsNull)
  .openapi({
    description: `The first sentence the agent says, at most ${GREETING_MAX.toLocaleString("en")} characters; \`null\` for none (an empty string is stored as \`null\`).`,
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
