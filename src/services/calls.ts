import type { Sql } from "postgres";
import {
  agentAllowed,
  agentNotAllowed,
  assertAgentAllowed,
  type ReadScope,
  type SecretKeyAuth,
} from "../auth/access.ts";
import { type AgentRow, findAgent } from "../db/agents.ts";
import { readCallFactsOf } from "../db/callAdmission.ts";
import {
  type CallRow,
  type CallStatus,
  type CallView,
  callsPage,
  callView,
  ENDED_STATUSES,
  findCall,
  findTranscript,
  transcriptView,
} from "../db/calls.ts";
import { contactExists } from "../db/contacts.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import { type Page, paginate } from "../db/engine/pages.ts";
import type { Deps, LivePlacement } from "../deps.ts";
import { ApiError, notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import type { FlatObject } from "../schemas.ts";
import { phoneCallRefusal } from "./admission.ts";
import { monthOf } from "./minutes.ts";
import { type PhoneCallToPlace, placeNow } from "./placement.ts";
import { tryCreateSimulatedCall } from "./simulatedCalls.ts";
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

/** The furthest a live call can be scheduled. */
export const MAX_SCHEDULE_AHEAD_DAYS = 366;
const MAX_SCHEDULE_AHEAD_MS = MAX_SCHEDULE_AHEAD_DAYS * 24 * 3600 * 1000;

/**
 * POST /v1/calls. Everything is checked before anything is written.
 * Test key: a simulated call; `runAt`, the do-not-call list, call window, country and limits do not
 * apply, nothing reaches a carrier and nothing counts in usage.
 * Live key: every calling rule in its order (services/admission.ts), then the call is placed
 * `initiated` and dialled from a timer after the answer; a future `runAt` creates a scheduled call and
 * its task instead, after the rules up to the call window (judged at `runAt`).
 */
export async function createCall(deps: Deps, auth: SecretKeyAuth, input: CreateCallInput): Promise<CallView> {
  return auth.livemode ? createLiveCall(deps, auth, input) : createTestCall(deps, auth, input);
}

/**
 * A test key's call: a simulated call; no calling rule applies. The usual call is one statement that
 * writes it if the agent (active) and the contact are the organization's; only when it wrote nothing
 * are they read, to answer why: the agent (404), the key's restriction (403), the contact (404), the
 * agent inactive (503).
 */
async function createTestCall(deps: Deps, auth: SecretKeyAuth, input: CreateCallInput): Promise<CallView> {
  const contactId = input.contactId ?? null;
  const call = {
    organizationId: auth.organizationId,
    agentId: input.agentId,
    direction: "outbound" as const,
    to: input.to,
    contactId,
    variables: input.variables ?? {},
  };
  const plausible =
    isId(input.agentId, "agt") &&
    agentAllowed(auth, input.agentId) &&
    (contactId === null || isId(contactId, "ct"));
  if (plausible) {
    const created = await tryCreateSimulatedCall(deps, call);
    if (created) return created;
  }
  const agent = isId(input.agentId, "agt")
    ? await findAgent(deps.sql, auth.organizationId, input.agentId)
    : null;
  await checkAgentAndContact(deps.sql, auth, agent, contactId);
  if (!agent!.active)
    throw new ApiError("agent_unavailable", "This agent is not active.", { param: "agentId" });
  // Everything holds now (the agent was activated, or the contact created, since the first try).
  return (await tryCreateSimulatedCall(deps, call)) ?? createTestCall(deps, auth, input);
}

/** 404 for the agent, 403 for the key's restriction, 404 for the contact, in this order; the contact id. */
async function checkAgentAndContact(
  sql: Db,
  auth: SecretKeyAuth,
  agent: AgentRow | null,
  contactId: string | null,
  contactFound?: Promise<boolean>,
): Promise<string | null> {
  if (!agent) throw notFound("agent", "agentId");
  assertAgentAllowed(auth, agent.id);
  if (contactId !== null) {
    const found =
      isId(contactId, "ct") && (await (contactFound ?? contactExists(sql, auth.organizationId, contactId)));
    if (!found) throw notFound("contact", "contactId");
  }
  return contactId;
}

/**
 * A live key's call. Placed now: batched with the other live calls that arrive meanwhile
 * (`placeLiveCalls`). Scheduled: one transaction whose first round trip carries every read
 * (the agent and what the calling rules need, the contact), then the checks up to the call window
 * (at `runAt`) and the call scheduled.
 */
async function createLiveCall(deps: Deps, auth: SecretKeyAuth, input: CreateCallInput): Promise<CallView> {
  const runAt = input.runAt ? new Date(input.runAt) : null;
  const now = deps.clock.now();
  const scheduled = runAt !== null && runAt.getTime() > now.getTime();
  // A property of the body alone: refused like any other bad field, before anything is looked up.
  // (Test keys ignore runAt, however far.)
  if (scheduled && runAt.getTime() - now.getTime() > MAX_SCHEDULE_AHEAD_MS) {
    throw new ApiError("invalid_request", `runAt must be at most ${MAX_SCHEDULE_AHEAD_DAYS} days ahead.`, {
      param: "runAt",
    });
  }
  const request: LivePlacement = {
    auth,
    agentId: input.agentId,
    to: input.to,
    contactId: input.contactId ?? null,
    variables: input.variables ?? {},
  };
  if (!scheduled) {
    const placed = await deps.batches.livePlacements.run(request);
    if (placed instanceof ApiError) throw placed;
    return placed;
  }
  return pipelinedTransaction(deps.sql, async (tx) => {
    const agent = await checkScheduledCall(deps, tx, request, runAt);
    return scheduleCall(tx, deps, {
      organizationId: auth.organizationId,
      agent,
      to: request.to,
      contactId: request.contactId,
      variables: request.variables,
      runAt,
    });
  });
}

/**
 * A scheduled call's checks, on one read of everything they need (no lock: no limit applies before the
 * call is placed), in their order: the agent (404), the key's restriction (403), then every check of a
 * live phone call up to the call window, judged at `runAt` (services/admission.ts). The agent.
 */
async function checkScheduledCall(deps: Deps, tx: Db, r: LivePlacement, runAt: Date): Promise<AgentRow> {
  const contactId = r.contactId !== null && isId(r.contactId, "ct") ? r.contactId : null;
  const [read] = await readCallFactsOf(
    tx,
    [
      {
        organizationId: r.auth.organizationId,
        to: r.to,
        agentId: isId(r.agentId, "agt") ? r.agentId : null,
        contactId,
      },
    ],
    monthOf(deps.clock.now()),
  );
  // Only an organization deleted under a key could miss; there is no such operation.
  const facts = read!.facts;
  if (!facts) throw notFound("organization");
  const agent = facts.agent;
  if (!agent) throw notFound("agent", "agentId");
  assertAgentAllowed(r.auth, agent.id);
  const refusal = phoneCallRefusal(
    deps,
    { organization: facts.organization, agent, to: r.to, at: runAt, scheduled: true },
    {
      contactMissing: r.contactId !== null && read!.contactFound !== true,
      planRemaining: facts.organization.plan_minutes - facts.plan_used,
      blocked: facts.blocked,
      load: null,
    },
  );
  if (refusal) throw refusal;
  return agent;
}

/**
 * Live calls placed now, in one transaction for the batch (services/placement.ts): every request's
 * checks in their order, those under its organization's locks on the limits and minutes the requests
 * before it in the batch left, and the calls placed with their reservations and dial timers, in one
 * round trip with the commit. A refused request writes nothing and gets its error; the others are
 * placed. One request alone is a batch of one. Batching is what lets an organization place more than
 * one call per lock: its placements queue on that lock (BENCHMARKS.md, "Live phone calls").
 */
export async function placeLiveCalls(
  deps: Deps,
  requests: LivePlacement[],
  /** The requests that arrived while this batch waited for its connection (engine/coalesce.ts). */
  more: () => LivePlacement[] = () => [],
  /** Where the batch runs: the placements' own connection when the process has one (compose.ts). */
  sql: Sql = deps.sql,
): Promise<(CallView | ApiError)[]> {
  const answers: (CallView | ApiError)[] = [];
  // The request each call to place answers, in the order the calls are placed.
  const answering: number[] = [];
  const callsOf = (from: number): PhoneCallToPlace[] => {
    const calls: PhoneCallToPlace[] = [];
    for (let i = from; i < requests.length; i++) {
      const r = requests[i]!;
      // A malformed agent id is an unknown agent: nothing to look up.
      if (!isId(r.agentId, "agt")) {
        answers[i] = notFound("agent", "agentId");
        continue;
      }
      answering.push(i);
      calls.push({
        callId: deps.ids.next("call"),
        organizationId: r.auth.organizationId,
        agentId: r.agentId,
        to: r.to,
        // A malformed contact id is an unknown contact: its check finds none.
        contactId: r.contactId,
        campaignId: null,
        variables: r.variables,
        ...(agentAllowed(r.auth, r.agentId) ? {} : { barred: agentNotAllowed() }),
      });
    }
    return calls;
  };
  const placements = await placeNow(deps, sql, callsOf(0), () => {
    const from = requests.length;
    requests.push(...more());
    return callsOf(from);
  });
  for (const [j, p] of placements.entries()) {
    answers[answering[j]!] = "call" in p ? callView(p.call) : p.refused;
  }
  return answers;
}

// ——— reads ———

/** Malformed, unknown, foreign, other-mode: all the same 404. */
export async function getCall(deps: Pick<Deps, "sql">, auth: ReadScope, id: string): Promise<CallView> {
  const row = isId(id, "call") ? await findCall(deps.sql, auth, id) : null;
  if (!row) throw notFound("call");
  return callView(row);
}

export async function getTranscript(deps: Pick<Deps, "sql">, auth: ReadScope, id: string) {
  const row = isId(id, "call") ? await findTranscript(deps.sql, auth, id) : null;
  if (!row) throw notFound("call");
  // A live call's transcript, reported by its voice agent, is there once the call has ended too.
  if (!row.transcript || !(ENDED_STATUSES as readonly string[]).includes(row.status)) {
    throw new ApiError("not_found", "This call has no transcript yet.");
  }
  return transcriptView({ ...row, transcript: row.transcript });
}

/**
 * The recording of a call, once its voice agent reported one. A simulated call has none; a call of the
 * other mode is not found like any other.
 */
export async function getRecording(deps: Pick<Deps, "sql">, auth: ReadScope, id: string) {
  const row = isId(id, "call") ? await findCall(deps.sql, auth, id) : null;
  if (!row) throw notFound("call");
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
  return paginate<CallRow, CallView>({ ...callsPage(deps.sql, auth, q), map: callView });
}
