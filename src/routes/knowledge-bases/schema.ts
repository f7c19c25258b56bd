import { z } from "@hono/zod-openapi";
import { queryValue } from "../../lists/cursor.ts";
import { Timestamp } from "../../schemas.ts";

/** Request and response schemas of knowledge-base documents. */

export const DocumentInputSchema = z
  .object({
    title: z
      .string()
      .trim()
      .min(1, { message: "must not be empty" })
      .max(200, { message: "must be at most 200 characters" })
      .openapi({ example: "Opening hours" }),
    text: z
      .string()
      .refine((t) => t.trim().length > 0, { message: "must not be empty" })
      .openapi({
        description: "The document's plain text (the whole request at most 1 MiB).",
        example: "We are open Monday to Friday, 9:00 to 18:00.\n\nOn Saturdays, 10:00 to 13:00.",
      }),
  })
  .strict()
  .openapi("DocumentInput");

export const KnowledgeBaseIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
});

export const DocumentIdParams = KnowledgeBaseIdParams.extend({
  documentId: z
    .string()
    .openapi({ param: { name: "documentId", in: "path" }, example: "doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
});

const documentFields = {
  id: z.string().openapi({ example: "doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
  knowledgeBaseId: z.string().openapi({ example: "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
  title: z.string().openapi({ example: "Opening hours" }),
  chunkCount: z.number().int().openapi({ example: 2 }),
  createdAt: Timestamp,
};

export const DocumentSchema = z.object(documentFields).openapi("Document");

export const DocumentWithTextSchema = z
  .object({
    ...documentFields,
    text: z.string().openapi({
      description:
        "The document's text, put back together from its chunks: runs of whitespace are single spaces, " +
        "paragraphs are separated by a blank line.",
      example: "We are open Monday to Friday, 9:00 to 18:00.\n\nOn Saturdays, 10:00 to 13:00.",
    }),
  })
  .openapi("DocumentWithText");

/** The answer of an upload. */
export const CreatedDocumentSchema = z
  .object({
    documentId: z.string().openapi({ example: "doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    chunkCount: z.number().int().openapi({ example: 3 }),
    livemode: z.boolean(),
    simulated: z.literal(true).optional().openapi({
      description:
        "Only with a test key: the document id and chunk count are fictitious, nothing was stored.",
    }),
  })
  .openapi("CreatedDocument");

/** The data of `knowledge.document_ready`. */
export const DocumentReadySchema = z
  .object({
    documentId: z.string().openapi({ example: "doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    knowledgeBaseId: z.string().openapi({ example: "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    chunkCount: z.number().int().openapi({ description: "Fictitious for a test-mode upload.", example: 3 }),
    livemode: z.boolean(),
    createdAt: Timestamp.openapi({
      description: "When the document was added (a document never changes: its one event's time).",
    }),
  })
  .openapi("DocumentReady");

export const DeletedDocumentSchema = z
  .object({
    id: z.string().openapi({ example: "doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    deleted: z.literal(true),
  })
  .openapi("DeletedDocument");

export const SEARCH_LIMIT_DEFAULT = 5;
export const SEARCH_LIMIT_MAX = 20;
const SEARCH_LIMIT_RE = /^[0-9]{1,3}$/;

/** `q` (1–500 characters) and `limit` (1–20, default 5): a ranked query, not a list, so no cursor. */
export const SearchQuery = z
  .object({
    q: queryValue("a string of 1 to 500 characters")
      .min(1, { message: "must not be empty" })
      .max(500, { message: "must be at most 500 characters" })
      .openapi({
        param: { name: "q", in: "query" },
        description:
          "What to look for, in words (1–500 characters): a chunk matches when it holds any of them, and ranks " +
          "higher the more of them it holds.",
        example: "opening hours on saturday",
      }),
    limit: queryValue(`an integer from 1 to ${SEARCH_LIMIT_MAX}`)
      .optional()
      .transform((v, ctx) => {
        if (v === undefined) return SEARCH_LIMIT_DEFAULT;
        const n = SEARCH_LIMIT_RE.test(v) ? Number(v) : Number.NaN;
        if (!Number.isInteger(n) || n < 1 || n > SEARCH_LIMIT_MAX) {
          ctx.addIssue({ code: "custom", message: `must be an integer from 1 to ${SEARCH_LIMIT_MAX}` });
          return z.NEVER;
        }
        return n;
      })
      .openapi({
        param: { name: "limit", in: "query" },
        type: "integer",
        minimum: 1,
        maximum: SEARCH_LIMIT_MAX,
        default: SEARCH_LIMIT_DEFAULT,
        description: `How many results at most, 1 to ${SEARCH_LIMIT_MAX}. Default ${SEARCH_LIMIT_DEFAULT}.`,
      }),
  })
  .strict();

export const SearchResultsSchema = z
  .object({
    livemode: z.boolean(),
    results: z
      .array(
        z
          .object({
            documentId: z.string().openapi({ example: "doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
            title: z.string().openapi({ example: "Opening hours" }),
            chunkIndex: z
              .number()
              .int()
              .openapi({ description: "The chunk's place in its document, from 0.", example: 1 }),
            text: z.string().openapi({ example: "On Saturdays we open from 10:00 to 13:00." }),
            score: z
              .number()
              .openapi({ description: "Relevance, between 0 and 1: higher is better.", example: 0.0759 }),
          })
          .openapi("SearchResult"),
      )
      .openapi({
        description: "Best first. Always empty with a test key (test documents are never stored).",
      }),
  })
  .openapi("SearchResults");
