import { z } from "@hono/zod-openapi";
import { listEnvelope, listQuery, livemodeParam, phoneFilter } from "../../lists/cursor.ts";
import { PhoneSchema, Timestamp } from "../../schemas.ts";

const BN_ID = "bn_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

export const BlockedNumberInput = z
  .object({
    phone: PhoneSchema.openapi({ description: "The number never to call, E.164.", example: "+33612345678" }),
    reason: z
      .string({ error: "must be a string" })
      .trim()
      .min(1, { message: "must not be empty (leave it out or send null)" })
      .max(500, { message: "must be at most 500 characters" })
      .nullable()
      .optional()
      .openapi({ description: "Why the number is listed, for people.", example: "Asked not to be called" }),
  })
  .strict()
  .openapi("BlockedNumberInput");

export const BlockedNumberSchema = z
  .object({
    id: z.string().openapi({ example: BN_ID }),
    livemode: z.boolean().openapi({
      description:
        "Live entries apply to live phone calls; test entries (made with a test key) are consulted by nothing.",
    }),
    phone: z.string().openapi({ example: "+33612345678" }),
    reason: z.string().nullable().openapi({ example: "Asked not to be called" }),
    createdAt: Timestamp,
  })
  .openapi("BlockedNumber", { description: "A number of the organization's do-not-call list." });

export const BlockedNumberListSchema = listEnvelope(BlockedNumberSchema, "BlockedNumberList");

export const BlockedNumberListQuery = listQuery({
  livemode: livemodeParam,
  phone: phoneFilter("Only the entry of this number"),
});

export const BlockedNumberIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: BN_ID }),
});

export const DeletedBlockedNumberSchema = z
  .object({ id: z.string().openapi({ example: BN_ID }), deleted: z.literal(true) })
  .openapi("DeletedBlockedNumber");
