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
import { callFacts, checkPhoneCall } from "./admission.ts";
import { placePhoneCall } from "./liveCalls.ts";
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
 * Live key: every calling rule in its order (services/admission.ts), then the call is placed
 * `initiated` and dialled from a timer after the answer; a future `runAt` creates a scheduled call and
 * its task instead, after the rules up to the call window (judged at `runAt`).
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
        agentLanguage: agent.language,
        direction: "outbound",
        to: input.to,
        contactId,
        variables,
      }),
    );
  }

  const runAt = input.runAt ? new Date(input.runAt) : null;
  const now = deps.clock.now();
  const scheduled = runAt !== null && runAt.getTime() > now.getTime();
  if (scheduled && runAt.getTime() - now.getTime() > MAX_SCHEDULE_AHEAD_MS) {
    throw new ApiError("invalid_request", "runAt must be within a year.", { param: "runAt" });
  }
  // Paid plan → plan minutes → carrier → agent active → blocked → country → call window (at runAt
  // for a scheduled call, which checks nothing further until its task fires and checks everything).
  const facts = await callFacts(deps, deps.sql, auth.organizationId, input.to);
  checkPhoneCall(deps, facts, agent, { to: input.to, at: scheduled ? runAt : now, scheduled });
  if (scheduled) {
    return pipelinedTransaction(deps.sql, (tx) =>
      scheduleCall(tx, deps, {
        organizationId: auth.organizationId,
        agent,
        to: input.to,
        contactId,
        variables,
        runAt,
      }),
    );
  }
  // Concurrency → hourly limit → the minutes, under the organization's lock; then the call is placed.
  const row = await pipelinedTransaction(deps.sql, (tx) =>
    placePhoneCall(tx, deps, {
      callId: deps.ids.next("call"),
      organization: facts.organization,
      agent,
      to: input.to,
      contactId,
      campaignId: null,
      variables,
    }),
  );
  return callView(row);
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
  if (!row.transcript) throw new ApiError("not_found", "This call has no transcript yet.");
  return transcriptView({ id: row.id, livemode: row.livemode, transcript: row.transcript });
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
