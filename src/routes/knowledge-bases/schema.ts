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
