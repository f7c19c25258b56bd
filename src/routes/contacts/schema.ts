import { z } from "@hono/zod-openapi";
import { listEnvelope, listQuery, phoneFilter, textFilter } from "../../lists/cursor.ts";
import { FlatObjectSchema, PhoneSchema as SharedPhone, Timestamp, UpdatedAt } from "../../schemas.ts";

const PhoneSchema = SharedPhone.openapi({
  example: "+33612345678",
  description: "Phone number in E.164 format. Not unique.",
});

const NameSchema = z
  .string()
  .trim()
  .min(1, { message: "must not be empty (send null to clear it)" })
  .max(200, { message: "must be at most 200 characters" })
  .openapi({ example: "Jeanne Martin" });

const EmailSchema = z
  .email({ message: "must be a valid email address" })
  .max(254, { message: "must be at most 254 characters" })
  .openapi({ example: "jeanne@example.com" });

/** `metadata`: a flat object. */
export const FlatMetadataSchema = FlatObjectSchema.openapi({
  description:
    "Flat object: at most 50 keys of at most 64 characters; values are strings (≤ 1,000 characters), " +
    "numbers, booleans or null.",
  example: { customerId: "A-1042", vip: true },
});

export const ContactInputSchema = z
  .object({
    phone: PhoneSchema,
    name: NameSchema.nullable().optional(),
    email: EmailSchema.nullable().optional(),
    metadata: FlatMetadataSchema.nullable().optional().openapi({ description: "Defaults to `{}`." }),
  })
  .strict()
  .openapi("ContactInput");

export const ContactPatchSchema = z
  .object({
    phone: PhoneSchema.optional(),
    name: NameSchema.nullable().optional(),
    email: EmailSchema.nullable().optional(),
    metadata: FlatMetadataSchema.nullable()
      .optional()
      .openapi({ description: "Replaces the whole metadata object; `null` clears it to `{}`." }),
  })
  .strict()
  .openapi("ContactPatch", {
    description: "Only the fields sent change. `null` clears `name` and `email`, and empties `metadata`.",
  });

const CONTACT_ID_EXAMPLE = "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

export const ContactSchema = z
  .object({
    id: z.string().openapi({ example: CONTACT_ID_EXAMPLE }),
    phone: z.string().openapi({ example: "+33612345678" }),
    name: z.string().nullable().openapi({ example: "Jeanne Martin" }),
    email: z.string().nullable().openapi({ example: "jeanne@example.com" }),
    metadata: FlatMetadataSchema,
    createdAt: Timestamp,
    updatedAt: UpdatedAt,
  })
  .openapi("Contact", {
    description: "A contact of the organization. Contacts are real in both modes, test keys included.",
  });

export const ContactListSchema = listEnvelope(ContactSchema, "ContactList");

export const ContactListQuery = listQuery({
  phone: phoneFilter("Only contacts with exactly this phone number"),
  email: textFilter("Only contacts with this email address (case-insensitive).", 254),
});

export const ContactIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: CONTACT_ID_EXAMPLE }),
});

export const DeletedContactSchema = z
  .object({
    id: z.string().openapi({ example: CONTACT_ID_EXAMPLE }),
    deleted: z.literal(true),
    updatedAt: UpdatedAt.openapi({
      description: "When the contact was deleted: after its last `updatedAt`, so the deletion orders last.",
    }),
  })
  .openapi("DeletedContact");
