import type { SecretKeyAuth } from "../auth/access.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import {
  insertKnowledgeBase,
  type KnowledgeBaseRow,
  parseSearchQuery,
  reindexKnowledgeBase,
  searchChunks,
  updateKnowledgeBase as updateKnowledgeBaseRow,
} from "../db/knowledgeBases.ts";
import type { Deps, TxDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import { assertOrganization } from "./organizations.ts";

/**
 * Knowledge bases: created by operators; documents go into them through the API (services/documents.ts);
 * voice agents search them. A knowledge base's language decides how its chunks are indexed and its
 * queries parsed (PostgreSQL full-text search, the same on the embedded database): French and English
 * are stemmed and lose their stop words; any other language, or none, is matched word for word.
 */

export const knowledgeBaseView = (r: KnowledgeBaseRow) => ({
  id: r.id,
  organizationId: r.organization_id,
  name: r.name,
  language: r.language,
  createdAt: r.created_at.toISOString(),
});

export async function createKnowledgeBase(
  deps: TxDeps,
  organizationId: string,
  input: { name: string; language?: string | null | undefined },
) {
  await assertOrganization(deps, organizationId);
  const row = await insertKnowledgeBase(deps.sql, {
    id: deps.ids.next("kb"),
    organization_id: organizationId,
    name: input.name,
    language: input.language ?? null,
    created_at: deps.clock.now(),
  });
  return knowledgeBaseView(row);
}

/** Changes the name or the language (null: none); a new language indexes the chunks again, in the same transaction. */
export async function updateKnowledgeBase(
  deps: Deps,
  id: string,
  input: { name?: string | undefined; language?: string | null | undefined },
) {
  if (!isId(id, "kb")) throw notFound("knowledge base");
  const row = await pipelinedTransaction(deps.sql, async (tx) => {
    const updated = await updateKnowledgeBaseRow(tx, id, {
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(input.language !== undefined ? { language: input.language } : {}),
    });
    if (updated && input.language !== undefined) await reindexKnowledgeBase(tx, id);
    return updated;
  });
  if (!row) throw notFound("knowledge base");
  return knowledgeBaseView(row);
}

export interface SearchResult {
  documentId: string;
  title: string;
  chunkIndex: number;
  text: string;
  score: number;
}

/**
 * `GET /v1/knowledge-bases/{id}/search`: the chunks that best match `q`, best first. A test key gets no
 * results (test documents are never stored); an unknown or foreign knowledge base is 404 in both modes.
 */
export async function searchKnowledgeBase(
  deps: Pick<Deps, "sql">,
  auth: Pick<SecretKeyAuth, "organizationId" | "livemode">,
  knowledgeBaseId: string,
  q: { q: string; limit: number },
): Promise<{ livemode: boolean; results: SearchResult[] }> {
  const parsed = isId(knowledgeBaseId, "kb")
    ? await parseSearchQuery(deps.sql, auth.organizationId, knowledgeBaseId, q.q)
    : null;
  if (!parsed) throw notFound("knowledge base");
  if (!auth.livemode || parsed.query === "") return { livemode: auth.livemode, results: [] };
  const hits = await searchChunks(deps.sql, knowledgeBaseId, parsed.query, q.limit);
  return {
    livemode: true,
    results: hits.map((h) => ({
      documentId: h.document_id,
      title: h.title,
      chunkIndex: h.chunk_index,
      text: h.text,
      score: h.score,
    })),
  };
}
