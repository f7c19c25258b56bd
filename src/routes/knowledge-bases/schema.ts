import { z } from "@hono/zod-openapi";

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
  createdAt: z.string().openapi({ example: "2026-11-21T09:30:00.000Z" }),
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

export const DeletedDocumentSchema = z
  .object({
    id: z.string().openapi({ example: "doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    deleted: z.literal(true),
  })
  .openapi("DeletedDocument");
