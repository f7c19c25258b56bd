import { ApiError } from "../errors.ts";

/** What a valid secret key resolves to: its organization, mode, scopes and agent restriction. */
export interface SecretKeyAuth {
  keyId: string;
  organizationId: string;
  mode: "live" | "test";
  livemode: boolean;
  scopes: string[];
  /** null: every agent of the organization. */
  agentIds: string[] | null;
  paidPlan: boolean;
}

/** What a read needs of a key: its organization, its mode and its agent restriction. */
export type ReadScope = Pick<SecretKeyAuth, "organizationId" | "livemode" | "agentIds">;

/** False when the key is restricted to other agents. */
export function agentAllowed(auth: Pick<SecretKeyAuth, "agentIds">, agentId: string): boolean {
  return !auth.agentIds || auth.agentIds.includes(agentId);
}

/** 403 `agent_not_allowed`: the key is restricted to other agents. */
export function agentNotAllowed(param = "agentId"): ApiError {
  return new ApiError("agent_not_allowed", "This key is restricted to other agents.", { param });
}

/** 403 `agent_not_allowed` when the key is restricted to other agents. */
export function assertAgentAllowed(
  auth: Pick<SecretKeyAuth, "agentIds">,
  agentId: string,
  param = "agentId",
): void {
  if (!agentAllowed(auth, agentId)) throw agentNotAllowed(param);
}
