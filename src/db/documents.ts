import type { Db } from "./engine/connection.ts";

/** Statements of knowledge-base documents (documents) and their chunks (document_chunks). */

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
    chunks: string[];
    createdAt: Date;
  },
): Promise<boolean> {
  // The knowledge base must be the organization's: the insert selects it, and inserts nothing otherwise.
  const inserted = await tx`
    insert into documents (id, organization_id, knowledge_base_id, title, chunk_count, created_at)
    select ${d.id}, organization_id, id, ${d.title}, ${d.chunks.length}, ${d.createdAt}
    from knowledge_bases where id = ${d.knowledgeBaseId} and organization_id = ${d.organizationId}
    returning id`;
  if (inserted.length === 0) return false;
  await tx`
    insert into document_chunks (document_id, position, content)
    select ${d.id}, ordinality - 1, content
    from unnest(${d.chunks}::text[]) with ordinality as c(content, ordinality)`;
  return true;
}
