import type { Db } from "./engine/connection.ts";

/** Statements of the knowledge_bases table. */

export interface KnowledgeBaseRow {
  id: string;
  organization_id: string;
  name: string;
  created_at: Date;
}

export async function insertKnowledgeBase(sql: Db, row: KnowledgeBaseRow): Promise<KnowledgeBaseRow> {
  const [inserted] = await sql<KnowledgeBaseRow[]>`
    insert into knowledge_bases (id, organization_id, name, created_at)
    values (${row.id}, ${row.organization_id}, ${row.name}, ${row.created_at})
    returning *`;
  return inserted!;
}

export async function knowledgeBaseExists(sql: Db, organizationId: string, id: string): Promise<boolean> {
  const rows =
    await sql`select 1 from knowledge_bases where id = ${id} and organization_id = ${organizationId}`;
  return rows.length > 0;
}

/** The ids among `ids` that are knowledge bases of the organization. */
export async function existingKnowledgeBaseIds(
  sql: Db,
  organizationId: string,
  ids: string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await sql<{ id: string }[]>`
    select id from knowledge_bases where organization_id = ${organizationId} and id = any(${ids})`;
  return new Set(rows.map((r) => r.id));
}
