import type { SecretKeyAuth } from "../auth/access.ts";
import {
  type AgentRow,
  agentsOf,
  existingAgentIds,
  insertAgent,
  listAgents as listAgentRows,
  updateAgent as updateAgentRow,
} from "../db/agents.ts";
import { type Page, type PageInput, paginate } from "../db/engine/pages.ts";
import type { TxDeps } from "../deps.ts";
import { isId } from "../ids.ts";
import { assertOrganization, notFound } from "./organizations.ts";

/** Agents: created and changed by operators, listed by secret keys. */

export const agentView = (r: AgentRow) => ({
  id: r.id,
  organizationId: r.organization_id,
  name: r.name,
  active: r.active,
  livekitAgentName: r.livekit_agent_name,
  language: r.language,
  createdAt: r.created_at.toISOString(),
});

export interface AgentInput {
  name: string;
  active?: boolean | undefined;
  livekitAgentName?: string | null | undefined;
  language?: "en" | "fr" | undefined;
}

export async function createAgent(deps: TxDeps, organizationId: string, input: AgentInput) {
  await assertOrganization(deps, organizationId);
  const row = await insertAgent(deps.sql, {
    id: deps.ids.next("agt"),
    organization_id: organizationId,
    name: input.name,
    active: input.active ?? true,
    livekit_agent_name: input.livekitAgentName ?? null,
    language: input.language ?? "en",
    created_at: deps.clock.now(),
  });
  return agentView(row);
}

/** Changes the fields present in `input`; `livekitAgentName: null` clears it (the agent id is used). */
export async function updateAgent(deps: TxDeps, id: string, input: Partial<AgentInput>) {
  if (!isId(id, "agt")) throw notFound("agent");
  const row = await updateAgentRow(deps.sql, id, {
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(input.active !== undefined ? { active: input.active } : {}),
    ...("livekitAgentName" in input ? { livekit_agent_name: input.livekitAgentName ?? null } : {}),
    ...(input.language !== undefined ? { language: input.language } : {}),
  });
  if (!row) throw notFound("agent");
  return agentView(row);
}

export type AgentView = ReturnType<typeof agentView>;

/** The agents of one organization, newest first, with the details operators need (ids for keys). */
export async function listAgentsOf(
  deps: TxDeps,
  organizationId: string,
  q: PageInput,
): Promise<Page<AgentView>> {
  await assertOrganization(deps, organizationId);
  return paginate<AgentRow, AgentView>({
    sql: deps.sql,
    table: "agents",
    where: agentsOf(deps.sql, organizationId),
    prefix: "agt",
    limit: q.limit,
    startingAfter: q.starting_after,
    map: agentView,
  });
}

/** `GET /v1/agents`: the agents a secret key may use. */
export async function listAgentsForKey(deps: TxDeps, auth: SecretKeyAuth) {
  const rows = await listAgentRows(deps.sql, auth.organizationId, auth.agentIds);
  return { agents: rows.map((r) => ({ id: r.id, name: r.name, active: r.active })) };
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
  if (missing) throw notFound(`agent ${missing} in this organization`, param);
}
