import { assertAgentAllowed, type SecretKeyAuth } from "../auth/access.ts";
import { findAgent } from "../db/agents.ts";
import {
  CALL_COLUMNS,
  type CallRow,
  type CallStatus,
  type CallView,
  callsScope,
  callView,
  columnList,
  ENDED_STATUSES,
  findCall,
  findTranscript,
  transcriptView,
} from "../db/calls.ts";
import { contactExists } from "../db/contacts.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import { type Page, paginate } from "../db/engine/pages.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import type { FlatObject } from "../schemas.ts";
import { createSimulatedCall } from "./simulatedCalls.ts";
import { scheduleCall } from "./tasks.ts";

export { CALL_STATUSES } from "../db/calls.ts";

/** Calls: creation (simulated with a test key, scheduled or placed with a live key), reads, lists. */

/** What `POST /v1/calls` asks for, once validated. */
export interface CreateCallInput {
  agentId: string;
  /** E.164. */
  to: string;
  contactId?: string | null | undefined;
  variables?: FlatObject | undefined;
  /** ISO 8601; live keys only: a future time schedules the call. */
  runAt?: string | undefined;
}

/** The furthest a call can be scheduled. */
const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 3600 * 1000;

/**
 * POST /v1/calls. Everything is checked before anything is written.
 * Test key: a simulated call; `runAt`, the do-not-call list, call window, country and limits do not
 * apply, nothing reaches a carrier and nothing counts in usage.
 * Live key: paid plan (403) before carrier (503); a future `runAt` creates a scheduled call and its task.
 */
export async function createCall(deps: Deps, auth: SecretKeyAuth, input: CreateCallInput): Promise<CallView> {
  const agent = isId(input.agentId, "agt")
    ? await findAgent(deps.sql, auth.organizationId, input.agentId)
    : null;
  if (!agent) throw new ApiError("not_found", "No such agent.", { param: "agentId" });
  assertAgentAllowed(auth, agent.id);
  const contactId = input.contactId ?? null;
  if (contactId !== null) {
    if (!isId(contactId, "ct") || !(await contactExists(deps.sql, auth.organizationId, contactId))) {
      throw new ApiError("not_found", "No such contact.", { param: "contactId" });
    }
  }
  const variables = input.variables ?? {};

  if (!auth.livemode) {
    if (!agent.active)
      throw new ApiError("agent_unavailable", "This agent is not active.", { param: "agentId" });
    return pipelinedTransaction(deps.sql, (tx) =>
      createSimulatedCall(tx, deps, {
        organizationId: auth.organizationId,
        agentId: agent.id,
        agentLanguage: agent.content_language,
        direction: "outbound",
        to: input.to,
        contactId,
        variables,
      }),
    );
  }

  if (!auth.paidPlan) {
    throw new ApiError("plan_required", "Live calls need an active paid plan for the organization.");
  }
  if (!agent.active)
    throw new ApiError("agent_unavailable", "This agent is not active.", { param: "agentId" });
  const runAt = input.runAt ? new Date(input.runAt) : null;
  const now = deps.clock.now().getTime();
  if (runAt && runAt.getTime() > now) {
    if (runAt.getTime() - now > MAX_SCHEDULE_AHEAD_MS) {
      throw new ApiError("invalid_request", "runAt must be within a year.", { param: "runAt" });
    }
    return pipelinedTransaction(deps.sql, (tx) =>
      scheduleCall(tx, deps, {
        organizationId: auth.organizationId,
        agentId: agent.id,
        to: input.to,
        contactId,
        variables,
        runAt,
      }),
    );
  }
  throw new ApiError("carrier_unavailable", "No carrier is configured to place live phone calls.");
}

// ——— reads ———

type ReadScope = Pick<SecretKeyAuth, "organizationId" | "livemode" | "agentIds">;

/** Malformed, unknown, foreign, other-mode: all the same 404. */
export async function getCall(deps: Pick<Deps, "sql">, auth: ReadScope, id: string): Promise<CallView> {
  const row = isId(id, "call") ? await findCall(deps.sql, auth, id) : null;
  if (!row) throw new ApiError("not_found", "No such call.");
  return callView(row);
}

export async function getTranscript(deps: Pick<Deps, "sql">, auth: ReadScope, id: string) {
  const row = isId(id, "call") ? await findTranscript(deps.sql, auth, id) : null;
  if (!row) throw new ApiError("not_found", "No such call.");
  // A live call's transcript, reported by its voice agent, is there once the call has ended too.
  if (!row.transcript || !(ENDED_STATUSES as readonly string[]).includes(row.status)) {
    throw new ApiError("not_found", "This call has no transcript yet.");
  }
  return transcriptView({ id: row.id, livemode: row.livemode, transcript: row.transcript });
}

/**
 * The recording of a call, once its voice agent reported one. A simulated call has none; a call of the
 * other mode is not found like any other.
 */
export async function getRecording(deps: Pick<Deps, "sql">, auth: ReadScope, id: string) {
  const row = isId(id, "call") ? await findCall(deps.sql, auth, id) : null;
  if (!row) throw new ApiError("not_found", "No such call.");
  if (!row.recording_url) throw new ApiError("not_found", "This call has no recording.");
  return { callId: row.id, livemode: row.livemode, url: row.recording_url };
}

export function listCalls(
  deps: Pick<Deps, "sql">,
  auth: ReadScope,
  q: {
    limit: number;
    starting_after?: string | undefined;
    status?: CallStatus | undefined;
    agentId?: string | undefined;
    campaignId?: string | undefined;
  },
): Promise<Page<CallView>> {
  const { sql } = deps;
  return paginate<CallRow, CallView>({
    sql,
    table: "calls",
    where: callsScope(sql, auth, q),
    prefix: "call",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: columnList(sql, CALL_COLUMNS),
    map: callView,
  });
}
