import type { Db } from "./engine/connection.ts";
import type { IndexKey, PageInput, PageRequest } from "./engine/pages.ts";
import { nextUpdatedAt } from "./engine/updatedAt.ts";

export interface ContactRow {
  id: string;
  organization_id: string;
  phone: string;
  name: string | null;
  email: string | null;
  /** A flat object (see FlatMetadataSchema). */
  metadata: Record<string, string | number | boolean | null>;
  created_at: Date;
  updated_at: Date;
}

export async function insertContact(
  sql: Db,
  c: Omit<ContactRow, "updated_at"> & { updated_at?: Date },
): Promise<ContactRow> {
  const [row] = await sql<ContactRow[]>`
    insert into contacts (id, organization_id, phone, name, email, metadata, created_at, updated_at)
    values (${c.id}, ${c.organization_id}, ${c.phone}, ${c.name}, ${c.email}, ${sql.json(c.metadata as never)},
            ${c.created_at}, ${c.updated_at ?? c.created_at})
    returning *`;
  return row!;
}

export async function findContact(sql: Db, organizationId: string, id: string): Promise<ContactRow | null> {
  const [row] = await sql<ContactRow[]>`
    select * from contacts where id = ${id} and organization_id = ${organizationId}`;
  return row ?? null;
}

/** Inside a transaction: the row, locked until its end, so concurrent updates apply one after another. */
export async function lockContact(sql: Db, organizationId: string, id: string): Promise<ContactRow | null> {
  const [row] = await sql<ContactRow[]>`
    select * from contacts where id = ${id} and organization_id = ${organizationId} for update`;
  return row ?? null;
}

/** Changes the contact at `now` (the service's clock). */
export async function updateContactRow(
  sql: Db,
  id: string,
  v: Pick<ContactRow, "phone" | "name" | "email" | "metadata">,
  now: Date,
): Promise<ContactRow> {
  const [row] = await sql<ContactRow[]>`
    update contacts set phone = ${v.phone}, name = ${v.name}, email = ${v.email},
      metadata = ${sql.json(v.metadata as never)}, updated_at = ${nextUpdatedAt(sql, now)}
    where id = ${id}
    returning *`;
  return row!;
}

/**
 * Removes the contact at `now` (the service's clock): the time of its deletion, its last change (after
 * every earlier one, db/engine/updatedAt.ts); null when there was none (already deleted, or never of
 * this organization).
 */
export async function deleteContactRow(
  sql: Db,
  organizationId: string,
  id: string,
  now: Date,
): Promise<Date | null> {
  const [row] = await sql<{ deleted_at: Date }[]>`
    delete from contacts where id = ${id} and organization_id = ${organizationId}
    returning ${nextUpdatedAt(sql, now)} as deleted_at`;
  return row?.deleted_at ?? null;
}

/**
 * The page of a contacts list (db/engine/pages.ts), on (organization_id[, phone | lower(email)],
 * created_at desc, id desc) (sql/0002_contacts.sql); with both filters, the email is checked row by row
 * among the phone's contacts. A filter's range is pinned: the organization's index would serve it too.
 */
export function contactsPage(
  sql: Db,
  organizationId: string,
  q: PageInput & { phone?: string | undefined; email?: string | undefined },
): PageRequest<ContactRow> {
  const org: IndexKey = ["organization_id", organizationId];
  const email = q.email !== undefined ? sql`lower(${q.email})` : undefined;
  const keys: IndexKey[] =
    q.phone !== undefined ? [org, ["phone", q.phone]] : email ? [org, [sql`lower(email)`, email]] : [org];
  const filter = q.phone !== undefined && email ? sql`lower(email) = ${email}` : undefined;
  return {
    sql,
    table: "contacts",
    ranges: [{ keys, pinned: keys.length > 1, filter }],
    prefix: "ct",
    limit: q.limit,
    startingAfter: q.starting_after,
  };
}

export async function contactExists(sql: Db, organizationId: string, id: string): Promise<boolean> {
  const rows = await sql`select 1 from contacts where id = ${id} and organization_id = ${organizationId}`;
  return rows.length > 0;
}

/** The contacts of the organization among `ids` (phone and name), in no set order. */
export function findContactTargets(
  sql: Db,
  organizationId: string,
  ids: string[],
): Promise<{ id: string; phone: string; name: string | null }[]> {
  return sql<{ id: string; phone: string; name: string | null }[]>`
    select id, phone, name from contacts where organization_id = ${organizationId} and id = any(${ids})`;
}
