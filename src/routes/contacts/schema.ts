import { z } from "@hono/zod-openapi";
import { listEnvelope, listQuery, queryValue, textFilter } from "../../lists/cursor.ts";
import { E164, FlatMetadataSchema } from "../../services/contacts.ts";

const CONTACT_ID_EXAMPLE = "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

export const ContactSchema = z
  .object({
    id: z.string().openapi({ example: CONTACT_ID_EXAMPLE }),
    phone: z.string().openapi({ example: "+33612345678" }),
    name: z.string().nullable().openapi({ example: "Jeanne Martin" }),
    email: z.string().nullable().openapi({ example: "jeanne@example.com" }),
    metadata: FlatMetadataSchema,
    createdAt: z.string().openapi({ example: "2026-11-21T09:30:00.000Z" }),
    updatedAt: z.string().openapi({ example: "2026-11-21T09:30:00.000Z" }),
  })
  .openapi("Contact", {
    description: "A contact of the organization. Contacts are real in both modes, test keys included.",
  });

export const ContactListSchema = listEnvelope(ContactSchema, "ContactList");

export const ContactListQuery = listQuery({
  phone: queryValue("a phone number in E.164 format")
    // A `+` left unencoded in a query string arrives as a space; read it as the `+` it was meant to be.
    .transform((v) => v.replace(/^ (?=[0-9])/, "+"))
    .refine((v) => E164.test(v), {
      message: "must be a phone number in E.164 format, such as +33612345678 (encode + as %2B)",
    })
    .optional()
    .openapi({
      type: "string",
      description: "Only contacts with exactly this phone number (E.164; encode `+` as `%2B`).",
    }),
  email: textFilter("Only contacts with this email address (case-insensitive).", 254),
});

export const ContactIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: CONTACT_ID_EXAMPLE }),
});

export const DeletedContactSchema = z
  .object({
    id: z.string().openapi({ example: CONTACT_ID_EXAMPLE }),
    deleted: z.literal(true),
  })
  .openapi("DeletedContact");
