import {
  type ContactRow,
  contactsPage,
  deleteContactRow,
  findContact,
  insertContact,
  lockContact,
  updateContactRow,
} from "../db/contacts.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import { type Page, paginate } from "../db/engine/pages.ts";
import type { Deps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import type { FlatObject } from "../schemas.ts";
import { recordEvent } from "./events.ts";

/**
 * Contacts: real data of the organization in both modes . A write with a test key really
 * happens, and its event carries `livemode` false all the same (the mode of the key).
 */

/** Who writes: the organization, and the mode of the key, which only labels the events. */
export type Actor = { organizationId: string; livemode: boolean };

/** A contact to create, once validated. */
export interface ContactInput {
  phone: string;
  name?: string | null | undefined;
  email?: string | null | undefined;
  metadata?: FlatObject | null | undefined;
}

/** A change to a contact: only the fields present change; null clears `name` and `email`, empties `metadata`. */
export type ContactPatch = Partial<ContactInput>;

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

export async function createContact(deps: Deps, actor: Actor, input: ContactInput): Promise<Contact> {
  const v = input;
  return pipelinedTransaction(deps.sql, async (tx) => {
    const now = deps.clock.now();
    const row = await insertContact(tx, {
      id: deps.ids.next("ct"),
      organization_id: actor.organizationId,
      phone: v.phone,
      name: v.name ?? null,
      email: v.email ?? null,
      metadata: v.metadata ?? {},
      created_at: now,
      updated_at: now,
    });
    const contact = contactView(row);
    await recordEvent(tx, deps, {
      organizationId: actor.organizationId,
      agentId: null,
      type: "contact.created",
      livemode: actor.livemode,
      data: { ...contact },
    });
    return contact;
  });
}

export async function getContact(deps: Deps, organizationId: string, id: string): Promise<Contact> {
  if (!isId(id, "ct")) throw notFound("contact");
  const row = await findContact(deps.sql, organizationId, id);
  if (!row) throw notFound("contact");
  return contactView(row);
}

/**
 * Applies the fields sent. The row is locked first so concurrent patches apply one after another,
 * each emitting its own `contact.updated`. A patch that changes nothing emits nothing.
 */
export async function updateContact(
  deps: Deps,
  actor: Actor,
  id: string,
  patch: ContactPatch,
): Promise<Contact> {
  const v = patch;
  if (!isId(id, "ct")) throw notFound("contact");
  return pipelinedTransaction(deps.sql, async (tx) => {
    const current = await lockContact(tx, actor.organizationId, id);
    if (!current) throw notFound("contact");
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
    const row = await updateContactRow(tx, id, next, deps.clock.now());
    const contact = contactView(row);
    await recordEvent(tx, deps, {
      organizationId: actor.organizationId,
      agentId: null,
      type: "contact.updated",
      livemode: actor.livemode,
      data: { ...contact },
    });
    return contact;
  });
}

/**
 * Deletes for good: the id then answers 404 and is an invalid cursor. Exactly one event per deletion.
 * `updatedAt` is the deletion's time, after the contact's last change, so it orders the deletion after
 * the contact's other events.
 */
export async function deleteContact(
  deps: Deps,
  actor: Actor,
  id: string,
): Promise<{ id: string; deleted: true; updatedAt: string }> {
  if (!isId(id, "ct")) throw notFound("contact");
  return pipelinedTransaction(deps.sql, async (tx) => {
    const at = await deleteContactRow(tx, actor.organizationId, id, deps.clock.now());
    if (!at) throw notFound("contact");
    const deleted = { id, deleted: true as const, updatedAt: at.toISOString() };
    await recordEvent(tx, deps, {
      organizationId: actor.organizationId,
      agentId: null,
      type: "contact.deleted",
      livemode: actor.livemode,
      data: { ...deleted },
    });
    return deleted;
  });
}

export async function listContacts(
  deps: Deps,
  organizationId: string,
  q: {
    limit: number;
    starting_after?: string | undefined;
    phone?: string | undefined;
    email?: string | undefined;
  },
): Promise<Page<Contact>> {
  return paginate<ContactRow, Contact>({ ...contactsPage(deps.sql, organizationId, q), map: contactView });
}

function sameFlat(a: ContactRow["metadata"], b: ContactRow["metadata"]): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
