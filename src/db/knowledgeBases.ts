import type { Db } from "./engine/connection.ts";

/** Statements of the knowledge_bases table, and of the search over their chunks. */

export interface KnowledgeBaseRow {
  id: string;
  organization_id: string;
  name: string;
  /** A canonical BCP 47 tag, or null. */
  language: string | null;
  /** The text search configuration of its chunks and queries, derived from `language` by the database. */
  search_config: "french" | "english" | "simple";
  created_at: Date;
}

export async function insertKnowledgeBase(
  sql: Db,
  row: Omit<KnowledgeBaseRow, "search_config">,
): Promise<KnowledgeBaseRow> {
  const [inserted] = await sql<KnowledgeBaseRow[]>`
    insert into knowledge_bases (id, organization_id, name, language, created_at)
    values (${row.id}, ${row.organization_id}, ${row.name}, ${row.language}, ${row.created_at})
    returning *`;
  return inserted!;
}

/**
 * Changes the name and, when `language` is in the patch, the language (null: none); locks the
 * knowledge base until the end of the transaction. Null when there is no such knowledge base.
 */
export async function updateKnowledgeBase(
  tx: Db,
  id: string,
  patch: { name?: string; language?: string | null },
): Promise<KnowledgeBaseRow | null> {
  const [row] = await tx<KnowledgeBaseRow[]>`
    update knowledge_bases set
      name = coalesce(${patch.name ?? null}::text, name),
      language = ${"language" in patch ? tx`${patch.language ?? null}::text` : tx`language`}
    where id = ${id} returning *`;
  return row ?? null;
}

/**
 * Indexes the chunks of a knowledge base again with its configuration as it now is. Run in the
 * transaction that changed the language, after that change: documents added meanwhile wait for it
 * (see `insertDocument`), and this statement sees every one committed before.
 */
export async function reindexKnowledgeBase(tx: Db, id: string): Promise<void> {
  await tx`
    update document_chunks c set search_vector = to_tsvector(k.search_config::regconfig, search_text(c.content))
    from documents d join knowledge_bases k on k.id = d.knowledge_base_id
    where d.id = c.document_id and k.id = ${id}`;
}

export async function findKnowledgeBase(
  sql: Db,
  organizationId: string,
  id: string,
): Promise<KnowledgeBaseRow | null> {
  const [row] = await sql<KnowledgeBaseRow[]>`
    select * from knowledge_bases where id = ${id} and organization_id = ${organizationId}`;
  return row ?? null;
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

/**
 * A knowledge base of the organization and `text` parsed as a query with its configuration (stemmed,
 * stop words dropped), as tsquery text in which the words are alternatives: a chunk matches with any
 * of them. The query is empty when `text` has no word to look for. Null without such a knowledge base.
 * Queries and chunks both go through `search_text` (sql/0031_cjk_search.sql), which makes Chinese,
 * Japanese and Korean text words of two characters.
 */
export async function parseSearchQuery(
  sql: Db,
  organizationId: string,
  id: string,
  text: string,
): Promise<{ query: string } | null> {
  // plainto_tsquery joins the words with & (all required); `|` makes each one enough.
  const [row] = await sql<{ query: string }[]>`
    select replace(plainto_tsquery(search_config::regconfig, search_text(${text}))::text, ' & ', ' | ') as query
    from knowledge_bases where id = ${id} and organization_id = ${organizationId}`;
  return row ?? null;
}

export interface SearchHitRow {
  document_id: string;
  title: string;
  chunk_index: number;
  text: string;
  score: number;
}

/**
 * The chunks of a knowledge base that match `query` (from `parseSearchQuery`), best first: the more
 * of the query's words a chunk holds, and the more often, the higher (`ts_rank`, scaled to 0–1). Ties:
 * the newer document first, then the chunk's order.
 */
export function searchChunks(
  sql: Db,
  knowledgeBaseId: string,
  query: string,
  limit: number,
): Promise<SearchHitRow[]> {
  return sql<SearchHitRow[]>`
    select d.id as document_id, d.title, c.position as chunk_index, c.content as text,
      ts_rank(c.search_vector, ${query}::tsquery, 32)::float8 as score
    from document_chunks c join documents d on d.id = c.document_id
    where c.search_vector @@ ${query}::tsquery and d.knowledge_base_id = ${knowledgeBaseId}
    order by score desc, d.created_at desc, d.id desc, c.position
    limit ${limit}`;
}
