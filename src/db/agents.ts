import type { Db } from "./engine/connection.ts";
import type { PageInput, PageRequest } from "./engine/pages.ts";

/** Statements of the agents table. */

export interface AgentRow {
  id: string;
  organization_id: string;
  name: string;
  active: boolean;
  livekit_agent_name: string | null;
  /** A canonical BCP 47 tag. */
  language: string;
  /** The language of simulated content for this agent, derived from `language` by the database. */
  content_language: "en" | "fr";
  instructions: string | null;
  greeting: string | null;
  knowledge_base_ids: string[];
  created_at: Date;
}

/** What an insert sets (the rest is derived). */
export type NewAgent = Omit<AgentRow, "content_language">;

/** The fields an update may change. */
export type AgentPatch = Partial<
  Pick<
    AgentRow,
    "name" | "active" | "livekit_agent_name" | "language" | "instructions" | "greeting" | "knowledge_base_ids"
  >
>;

/** The agents of an organization (only those of `only` when given), newest first. */
export function listAgents(
  sql: Db,
  organizationId: string,
  only: string[] | null = null,
): Promise<AgentRow[]> {
  return sql<AgentRow[]>`
    select * from agents
    where organization_id = ${organizationId}
    ${only ? sql`and id = any(${only})` : sql``}
    order by created_at desc, id desc`;
}

/** The scope of an organization's list of agents (index agents_org_created). */
/** The page of an organization's agents (db/engine/pages.ts), on agents_org_created. */
export function agentsPage(sql: Db, organizationId: string, q: PageInput): PageRequest<AgentRow> {
  return {
    sql,
    table: "agents",
    ranges: [{ keys: [["organization_id", organizationId]] }],
    prefix: "agt",
    limit: q.limit,
    startingAfter: q.starting_after,
  };
}

export async function findAgent(sql: Db, organizationId: string, id: string): Promise<AgentRow | null> {
  const [row] = await sql<
    AgentRow[]
  >`select * from agents where id = ${id} and organization_id = ${organizationId}`;
  return row ?? null;
}

/** The organization of an agent, or null when there is no such agent. */
export async function agentOrganization(sql: Db, id: string): Promise<string | null> {
  const [row] = await sql<{ organization_id: string }[]>`select organization_id from agents where id = ${id}`;
  return row?.organization_id ?? null;
}

/** The ids among `ids` that are agents of the organization. */
export async function existingAgentIds(sql: Db, organizationId: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await sql<{ id: string }[]>`
    select id from agents where organization_id = ${organizationId} and id = any(${ids})`;
  return new Set(rows.map((r) => r.id));
}

export async function insertAgent(sql: Db, row: NewAgent): Promise<AgentRow> {
  const [inserted] = await sql<AgentRow[]>`
    insert into agents (id, organization_id, name, active, livekit_agent_name, language, instructions, greeting,
                        knowledge_base_ids, created_at)
    values (${row.id}, ${row.organization_id}, ${row.name}, ${row.active}, ${row.livekit_agent_name},
            ${row.language}, ${row.instructions}, ${row.greeting}, ${row.knowledge_base_ids}::text[], ${row.created_at})
    returning *`;
  return inserted!;
}

/**
 * Changes the fields present in `patch` (a field left out keeps its value; `livekit_agent_name`,
 * `instructions` and `greeting` may be set to null). Null when there is no such agent.
 */
export async function updateAgent(sql: Db, id: string, patch: AgentPatch): Promise<AgentRow | null> {
  // A nullable text field: the new value when present (null clears it), else the column as it is.
  const keep = (field: "livekit_agent_name" | "instructions" | "greeting") =>
    field in patch ? sql`${patch[field] ?? null}::text` : sql`${sql(field)}`;
  const [row] = await sql<AgentRow[]>`
    update agents set
      name = coalesce(${patch.name ?? null}, name),
      active = coalesce(${patch.active ?? null}::boolean, active),
      livekit_agent_name = ${keep("livekit_agent_name")},
      language = coalesce(${patch.language ?? null}, language),
      instructions = ${keep("instructions")},
      greeting = ${keep("greeting")},
      knowledge_base_ids = coalesce(${patch.knowledge_base_ids ?? null}::text[], knowledge_base_ids)
    where id = ${id} returning *`;
  return row ?? null;
}
