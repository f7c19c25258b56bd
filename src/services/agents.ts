import { agentAllowed, type SecretKeyAuth } from "../auth/access.ts";
import {
  type AgentPatch,
  type AgentRow,
  agentOrganization,
  agentsPage,
  existingAgentIds,
  findAgent,
  insertAgent,
  listAgents as listAgentRows,
  updateAgent as updateAgentRow,
} from "../db/agents.ts";
import { type Page, type PageInput, paginate } from "../db/engine/pages.ts";
import { existingKnowledgeBaseIds } from "../db/knowledgeBases.ts";
import type { TxDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import { assertOrganization } from "./organizations.ts";

/**
 * Agents: created and changed by operators, listed and read by secret keys. The voice agent dispatched
 * for a call reads its settings (language, instructions, greeting, knowledge bases) with `GET
 * /v1/agents/{id}`.
 */

/** The agent object of the API. */
export const agentView = (r: AgentRow) => ({
  id: r.id,
  name: r.name,
  active: r.active,
  language: r.language,
  instructions: r.instructions,
  greeting: r.greeting,
  knowledgeBaseIds: r.knowledge_base_ids,
  livekitAgentName: r.livekit_agent_name,
  createdAt: r.created_at.toISOString(),
});
export type AgentView = ReturnType<typeof agentView>;

/** What operators see: the agent object and its organization. */
export const agentDetailsView = (r: AgentRow) => ({ organizationId: r.organization_id, ...agentView(r) });

export interface AgentInput {
  name: string;
  active?: boolean | undefined;
  livekitAgentName?: string | null | undefined;
  /** A canonical BCP 47 tag (the request schema canonicalises it). */
  language?: string | undefined;
  instructions?: string | null | undefined;
  greeting?: string | null | undefined;
  knowledgeBaseIds?: string[] | undefined;
}

export async function createAgent(deps: TxDeps, organizationId: string, input: AgentInput) {
  await assertOrganization(deps, organizationId);
  if (input.knowledgeBaseIds) await assertKnowledgeBasesOf(deps, organizationId, input.knowledgeBaseIds);
  const row = await insertAgent(deps.sql, {
    id: deps.ids.next("agt"),
    organization_id: organizationId,
    name: input.name,
    active: input.active ?? true,
    livekit_agent_name: input.livekitAgentName ?? null,
    language: input.language ?? "en",
    instructions: input.instructions ?? null,
    greeting: input.greeting ?? null,
    knowledge_base_ids: input.knowledgeBaseIds ?? [],
    created_at: deps.clock.now(),
  });
  deps.agentLists.evict(organizationId);
  return agentDetailsView(row);
}

/**
 * Changes the fields present in `input`; `null` clears `livekitAgentName` (the agent id is then
 * dispatched), `instructions` and `greeting`. `knowledgeBaseIds` replaces the whole list.
 */
export async function updateAgent(deps: TxDeps, id: string, input: Partial<AgentInput>) {
  if (!isId(id, "agt")) throw notFound("agent");
  if (input.knowledgeBaseIds) {
    const organizationId = await agentOrganization(deps.sql, id);
    if (!organizationId) throw notFound("agent");
    await assertKnowledgeBasesOf(deps, organizationId, input.knowledgeBaseIds);
  }
  const patch: AgentPatch = {
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(input.active !== undefined ? { active: input.active } : {}),
    ...("livekitAgentName" in input ? { livekit_agent_name: input.livekitAgentName ?? null } : {}),
    ...(input.language !== undefined ? { language: input.language } : {}),
    ...("instructions" in input ? { instructions: input.instructions ?? null } : {}),
    ...("greeting" in input ? { greeting: input.greeting ?? null } : {}),
    ...(input.knowledgeBaseIds !== undefined ? { knowledge_base_ids: input.knowledgeBaseIds } : {}),
  };
  const row = await updateAgentRow(deps.sql, id, patch);
  if (!row) throw notFound("agent");
  deps.agentLists.evict(row.organization_id);
  return agentDetailsView(row);
}

export type AgentDetailsView = ReturnType<typeof agentDetailsView>;

/** The agents of one organization, newest first, with the details operators need (ids for keys). */
export async function listAgentsOf(
  deps: TxDeps,
  organizationId: string,
  q: PageInput,
): Promise<Page<AgentDetailsView>> {
  await assertOrganization(deps, organizationId);
  return paginate<AgentRow, AgentDetailsView>({
    ...agentsPage(deps.sql, organizationId, q),
    map: agentDetailsView,
  });
}

/** `GET /v1/agents`: the agents a secret key may use. */
export async function listAgentsForKey(deps: TxDeps, auth: SecretKeyAuth) {
  // Most requests of an integration read this list, few change it: kept per organization (Deps.agentLists).
  const rows = await deps.agentLists.through(auth.organizationId, () =>
    listAgentRows(deps.sql, auth.organizationId),
  );
  const only = auth.agentIds;
  return { agents: (only ? rows.filter((r) => only.includes(r.id)) : rows).map(agentView) };
}

/**
 * `GET /v1/agents/{id}`: one agent the key may use. Malformed, unknown, foreign, or outside the key's
 * agent restriction: the same 404. Agents have no mode: test and live keys read the same agent.
 */
export async function getAgentForKey(deps: TxDeps, auth: SecretKeyAuth, id: string): Promise<AgentView> {
  const row =
    isId(id, "agt") && agentAllowed(auth, id) ? await findAgent(deps.sql, auth.organizationId, id) : null;
  if (!row) throw notFound("agent");
  return agentView(row);
}

/** 404 with `param` unless every id is an agent of the organization. */
export async function assertAgentsOf(
  deps: TxDeps,
  organizationId: string,
  ids: string[],
  param: string,
): Promise<void> {
  const found = await existingAgentIds(
    deps.sql,
    organizationId,
    ids.filter((id) => isId(id, "agt")),
  );
  const missing = ids.find((id) => !found.has(id));
  // `!== undefined`: an empty id is missing too.
  if (missing !== undefined) throw notFound(`agent "${missing}" in this organization`, param);
}

/** 404 with `param` `knowledgeBaseIds` unless every id is a knowledge base of the organization. */
async function assertKnowledgeBasesOf(deps: TxDeps, organizationId: string, ids: string[]): Promise<void> {
  const found = await existingKnowledgeBaseIds(
    deps.sql,
    organizationId,
    ids.filter((id) => isId(id, "kb")),
  );
  const missing = ids.find((id) => !found.has(id));
  if (missing !== undefined) {
    throw notFound(`knowledge base "${missing}" in this organization`, "knowledgeBaseIds");
  }
}
