import { insertKnowledgeBase } from "../db/knowledgeBases.ts";
import type { TxDeps } from "../deps.ts";
import { assertOrganization } from "./organizations.ts";

/** Knowledge bases: created by operators; documents go into them through the API (services/documents.ts). */

export async function createKnowledgeBase(deps: TxDeps, organizationId: string, input: { name: string }) {
  await assertOrganization(deps, organizationId);
  const row = await insertKnowledgeBase(deps.sql, {
    id: deps.ids.next("kb"),
    organization_id: organizationId,
    name: input.name,
    created_at: deps.clock.now(),
  });
  return { id: row.id, organizationId, name: row.name, createdAt: row.created_at.toISOString() };
}
