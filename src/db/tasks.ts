import type { Db } from "./engine/connection.ts";

/** Statements of the tasks table: a live call to place at `run_at` (live mode only). */
export interface TaskRow {
  id: string;
  organization_id: string;
  type: "call";
  call_id: string;
  agent_id: string;
  to_number: string;
  run_at: Date;
  status: "scheduled" | "completed" | "cancelled";
  timer_id: string | null;
  created_at: Date;
}

export function taskView(t: TaskRow) {
  return {
    id: t.id,
    type: t.type,
    callId: t.call_id,
    agentId: t.agent_id,
    to: t.to_number,
    runAt: t.run_at.toISOString(),
    status: t.status,
    createdAt: t.created_at.toISOString(),
  };
}

export async function insertTask(sql: Db, t: Omit<TaskRow, "status">): Promise<TaskRow> {
  const [row] = await sql<TaskRow[]>`
    insert into tasks (id, organization_id, type, call_id, agent_id, to_number, run_at, status, timer_id, created_at)
    values (${t.id}, ${t.organization_id}, ${t.type}, ${t.call_id}, ${t.agent_id}, ${t.to_number}, ${t.run_at},
      'scheduled', ${t.timer_id}::bigint, ${t.created_at})
    returning id, organization_id, type, call_id, agent_id, to_number, run_at, status, timer_id::text, created_at`;
  return row!;
}

export async function listScheduledTasks(
  sql: Db,
  organizationId: string,
  agentIds: string[] | null,
): Promise<TaskRow[]> {
  return sql<TaskRow[]>`
    select id, organization_id, type, call_id, agent_id, to_number, run_at, status, timer_id::text, created_at
    from tasks
    where organization_id = ${organizationId} and status = 'scheduled'
    ${agentIds ? sql`and agent_id = any(${agentIds})` : sql``}
    order by run_at, id`;
}

export async function findScheduledTask(
  sql: Db,
  organizationId: string,
  agentIds: string[] | null,
  id: string,
): Promise<TaskRow | null> {
  const [row] = await sql<TaskRow[]>`
    select id, organization_id, type, call_id, agent_id, to_number, run_at, status, timer_id::text, created_at
    from tasks
    where id = ${id} and organization_id = ${organizationId} and status = 'scheduled'
    ${agentIds ? sql`and agent_id = any(${agentIds})` : sql``}`;
  return row ?? null;
}

/** Moves a task out of `scheduled`; null when it had already run or been cancelled. */
export async function finishTask(
  sql: Db,
  id: string,
  to: "completed" | "cancelled",
): Promise<TaskRow | null> {
  const [row] = await sql<TaskRow[]>`
    update tasks set status = ${to} where id = ${id} and status = 'scheduled'
    returning id, organization_id, type, call_id, agent_id, to_number, run_at, status, timer_id::text, created_at`;
  return row ?? null;
}
