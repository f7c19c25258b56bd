import type { Db } from "./engine/connection.ts";

export interface AgentRow {
  id: string;
  organization_id: string;
  name: string;
  active: boolean;
  livekit_agent_name: string | null;
  language: "en" | "fr";
  created_at: Date;
}

export async function listAgents(sql: Db, organizationId: string, only: string[] | null) {
  const rows = await sql<Pick<AgentRow, "id" | "name" | "active">[]>`
    select id, name, active from agents
    where organization_id = ${organizationId}
    ${only ? sql`and id = any(${only})` : sql``}
    order by created_at desc, id desc`;
  return rows.map((r) => ({ id: r.id, name: r.name, active: r.active }));
}

export async function findAgent(sql: Db, organizationId: string, id: string): Promise<AgentRow | null> {
  const [row] = await sql<
    AgentRow[]
  >`select * from agents where id = ${id} and organization_id = ${organizationId}`;
  return row ?? null;
}
