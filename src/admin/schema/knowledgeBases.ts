import { z } from "@hono/zod-openapi";
import { LanguageTagSchema, Timestamp } from "../../schemas.ts";
import { Name, orgId } from "./fields.ts";

/** A knowledge base as operators create, change and read it. */

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

export const KnowledgeBaseSchema = z
  .object({
    id: z.string().openapi({ example: "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    organizationId: orgId,
    name: z.string().openapi({ example: "FAQ" }),
    language: z.string().nullable().openapi({ example: "fr" }),
    createdAt: Timestamp,
  })
  .openapi("KnowledgeBase");
