import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";

/** Statements of knowledge-base documents (documents) and their chunks (document_chunks). */

export interface DocumentRow {
  id: string;
  knowledge_base_id: string;
  title: string;
  chunk_count: number;
  created_at: Date;
}

/** The columns of a document in lists (no text). */
export function documentListColumns(sql: Db): Fragment {
  return sql`id, knowledge_base_id, title, chunk_count, created_at`;
}

/**
 * Writes a document with its chunks, in the knowledge base `knowledgeBaseId` of the organization. False
 * (nothing written) when the organization has no such knowledge base.
 */
export async function insertDocument(
  tx: Db,
  d: {
    id: string;
    organizationId: string;
    knowledgeBaseId: string;
    title: string;
    chunks: { text: string; separator: string }[];
    createdAt: Date;
  },
): Promise<boolean> {
  // The knowledge base must be the organization's: the insert selects it, and inserts nothing otherwise.
  // It stays locked (for share) until the end of the transaction, so its language cannot change
  // between here and the indexing of the chunks (a change waits, then indexes them again itself).
  const inserted = await tx`
    insert into documents (id, organization_id, knowledge_base_id, title, chunk_count, created_at)
    select ${d.id}, organization_id, id, ${d.title}, ${d.chunks.length}, ${d.createdAt}
    from knowledge_bases where id = ${d.knowledgeBaseId} and organization_id = ${d.organizationId}
    for share
    returning id`;
  if (inserted.length === 0) return false;
  await tx`
    insert into document_chunks (document_id, position, content, separator, search_vector)
    select ${d.id}, ordinality - 1, content, separator,
      to_tsvector(k.search_config::regconfig, search_text(content))
    from unnest(${d.chunks.map((c) => c.text)}::text[], ${d.chunks.map((c) => c.separator)}::text[])
      with ordinality as c(content, separator, ordinality)
      cross join (select search_config from knowledge_bases where id = ${d.knowledgeBaseId}) k`;
  return true;
}

/**
 * The scope of a documents list: one knowledge base of the organization. Documents are live objects:
 * a test key's scope holds none.
 */
export function documentsScope(
  sql: Db,
  scope: { organizationId: string; knowledgeBaseId: string; livemode: boolean },
): Fragment {
  return sql`organization_id = ${scope.organizationId} and knowledge_base_id = ${scope.knowledgeBaseId}
    and ${scope.livemode}::boolean`;
}

/** One document of a knowledge base of the organization, with its text put back together from its chunks. */
export async function findDocument(
  sql: Db,
  organizationId: string,
  knowledgeBaseId: string,
  id: string,
): Promise<(DocumentRow & { text: string }) | null> {
  const [row] = await sql<(DocumentRow & { text: string })[]>`
    select d.id, d.knowledge_base_id, d.title, d.chunk_count, d.created_at,
      (select string_agg(case when c.position = 0 then '' else c.separator end || c.content, '' order by c.position)
       from document_chunks c where c.document_id = d.id) as text
    from documents d
    where d.id = ${id} and d.knowledge_base_id = ${knowledgeBaseId} and d.organization_id = ${organizationId}`;
  return row ?? null;
}

/** Deletes a document and its chunks; false when there is no such document in that knowledge base. */
export async function deleteDocument(
  sql: Db,
  organizationId: string,
  knowledgeBaseId: string,
  id: string,
): Promise<boolean> {
  const rows = await sql`
    delete from documents
    where id = ${id} and knowledge_base_id = ${knowledgeBaseId} and organization_id = ${organizationId}
    returning id`;
  return rows.length > 0;
}
