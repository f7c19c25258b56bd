import { type AgentRow, findAgent } from "../db/agents.ts";
import type { Db } from "../db/engine/connection.ts";
import { findOrganization } from "../db/organizations.ts";
import { ApiError } from "../errors.ts";

/** Checks that decide whether a live call may start, shared by every way of starting one. */

/** 403 `plan_required` unless the organization has an active paid plan (read now, not from the key). */
export async function assertPaidPlan(sql: Db, organizationId: string): Promise<void> {
  const org = await findOrganization(sql, organizationId);
  if (!org?.paid_plan) throw new ApiError("plan_required", "The organization has no active paid plan.");
}

/**
 * The agent of a web call, or 503 `agent_unavailable`: unknown, inactive, or (for a live call) no media
 * server configured.
 */
export async function assertAgentAvailable(
  sql: Db,
  organizationId: string,
  agentId: string,
  opts: { livemode: boolean; mediaServerConfigured: boolean },
): Promise<AgentRow> {
  const agent = await findAgent(sql, organizationId, agentId);
  if (!agent?.active || (opts.livemode && !opts.mediaServerConfigured)) {
    throw new ApiError("agent_unavailable", "The agent is not available right now.");
  }
  return agent;
}
