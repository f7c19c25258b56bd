import { z } from "@hono/zod-openapi";
import type { Sql } from "postgres";
import type { Clock } from "../clock.ts";
import {
  type ContactRow,
  contactsScope,
  deleteContactRow,
  findContact,
  insertContact,
  lockContact,
  updateContactRow,
} from "../db/contacts.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import { ApiError } from "../errors.ts";
import { isId, newId } from "../ids.ts";
import { type Page, paginate } from "../lists/cursor.ts";
import { FlatObjectSchema, PhoneSchema as SharedPhone } from "../schemas.ts";
import { recordEvent } from "./events.ts";

/**
 * Contacts: real data of the organization in both modes (SPEC.md). A write with a test key really
 * happens, and its event carries `livemode` false all the same (the mode of the key).
 */

type Ctx = { sql: Sql; clock: Clock };
/** Who writes: the organization, and the mode of the key, which only labels the events. */
export type Actor = { organizationId: string; livemode: boolean };

export { E164 } from "../schemas.ts";

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

/** `metadata`: a flat object (src/schemas.ts). */
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

export type ContactInput = z.input<typeof ContactInputSchema>;
export type ContactPatch = z.input<typeof ContactPatchSchema>;

export interface Contact {
  id: string;
  phone: string;
  name: string | null;
  email: string | null;
  metadata: ContactRow["metadata"];
  createdAt: string;
  updatedAt: string;
}

export function contactView(r: ContactRow): Contact {
  return {
    id: r.id,
    phone: r.phone,
    name: r.name,
    email: r.email,
    metadata: r.metadata,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

function notFound(): ApiError {
  return new ApiError("not_found", "No such contact.");
}

export async function createContact(
  { sql, clock }: Ctx,
  actor: Actor,
  input: ContactInput,
): Promise<Contact> {
  const v = ContactInputSchema.parse(input);
  return pipelinedTransaction(sql, async (tx) => {
    const now = clock.now();
    const row = await insertContact(tx, {
      id: newId("ct", clock),
      organization_id: actor.organizationId,
      phone: v.phone,
      name: v.name ?? null,
      email: v.email ?? null,
      metadata: v.metadata ?? {},
      created_at: now,
      updated_at: now,
    });
    const contact = contactView(row);
    await recordEvent(tx, clock, {
      organizationId: actor.organizationId,
      type: "contact.created",
      livemode: actor.livemode,
      data: { ...contact },
    });
    return contact;
  });
}

export async function getContact({ sql }: Ctx, organizationId: string, id: string): Promise<Contact> {
  if (!isId(id, "ct")) throw notFound();
  const row = await findContact(sql, organizationId, id);
  if (!row) throw notFound();
  return contactView(row);
}

/**
 * Applies the fields sent. The row is locked first so concurrent patches apply one after another,
 * each emitting its own `contact.updated`. A patch that changes nothing emits nothing.
 */
export async function updateContact(
  { sql, clock }: Ctx,
  actor: Actor,
  id: string,
  patch: ContactPatch,
): Promise<Contact> {
  const v = ContactPatchSchema.parse(patch);
  if (!isId(id, "ct")) throw notFound();
  return pipelinedTransaction(sql, async (tx) => {
    const current = await lockContact(tx, actor.organizationId, id);
    if (!current) throw notFound();
    const next = {
      phone: v.phone ?? current.phone,
      name: v.name !== undefined ? v.name : current.name,
      email: v.email !== undefined ? v.email : current.email,
      metadata: v.metadata !== undefined ? (v.metadata ?? {}) : current.metadata,
    };
    const unchanged =
      next.phone === current.phone &&
      next.name === current.name &&
      next.email === current.email &&
      sameFlat(next.metadata, current.metadata);
    if (unchanged) return contactView(current);
    const row = await updateContactRow(tx, id, { ...next, updated_at: clock.now() });
    const contact = contactView(row);
    await recordEvent(tx, clock, {
      organizationId: actor.organizationId,
      type: "contact.updated",
      livemode: actor.livemode,
      data: { ...contact },
    });
    return contact;
  });
}

/** Deletes for good: the id then answers 404 and is an invalid cursor. Exactly one event per deletion. */
export async function deleteContact(
  { sql, clock }: Ctx,
  actor: Actor,
  id: string,
): Promise<{ id: string; deleted: true }> {
  if (!isId(id, "ct")) throw notFound();
  return pipelinedTransaction(sql, async (tx) => {
    if (!(await deleteContactRow(tx, actor.organizationId, id))) throw notFound();
    const deleted = { id, deleted: true as const };
    await recordEvent(tx, clock, {
      organizationId: actor.organizationId,
      type: "contact.deleted",
      livemode: actor.livemode,
      data: { ...deleted },
    });
    return deleted;
  });
}

export async function listContacts(
  { sql }: Ctx,
  organizationId: string,
  q: {
    limit: number;
    starting_after?: string | undefined;
    phone?: string | undefined;
    email?: string | undefined;
  },
): Promise<Page<Contact>> {
  return paginate<ContactRow, Contact>({
    sql,
    table: "contacts",
    where: contactsScope(sql, organizationId, q),
    prefix: "ct",
    limit: q.limit,
    startingAfter: q.starting_after,
    map: contactView,
  });
}

function sameFlat(a: ContactRow["metadata"], b: ContactRow["metadata"]): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
