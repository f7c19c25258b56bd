import type { Sql } from "postgres";
import { agentAllowed, assertAgentAllowed, type ReadScope, type SecretKeyAuth } from "../auth/access.ts";
import { type AgentRow, findAgent } from "../db/agents.ts";
import { type CallFacts, readCallFactsOf } from "../db/callAdmission.ts";
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
import { insertPlacedPhoneCalls, type PlacedPhoneCall } from "../db/phonePlacements.ts";
import type { InsertedTimerRow } from "../db/timers.ts";
import type { Deps, LivePlacement } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import type { FlatObject } from "../schemas.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import { checkPhoneCall, placementCounts, readAdmissions } from "./admission.ts";
import { monthOf } from "./minutes.ts";
import { admitPlacement } from "./placement.ts";
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
  if (!agent) throw new ApiError("not_found", "No such agent.", { param: "agentId" });
  assertAgentAllowed(auth, agent.id);
  if (contactId !== null) {
    const found =
      isId(contactId, "ct") && (await (contactFound ?? contactExists(sql, auth.organizationId, contactId)));
    if (!found) throw new ApiError("not_found", "No such contact.", { param: "contactId" });
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
    const [read] = readLiveCalls(deps, tx, [request]);
    const { agent } = await checkLiveCall(deps, tx, request, read!, runAt, true);
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
 * The reads of live calls' checks, in one statement for them all: each one's agent and calling facts
 * (services/admission.ts), and its contact.
 */
function readLiveCalls(deps: Deps, tx: Db, rs: readonly LivePlacement[]) {
  const contactOf = (r: LivePlacement) =>
    r.contactId !== null && isId(r.contactId, "ct") ? r.contactId : null;
  const read = readCallFactsOf(
    tx,
    rs.map((r) => ({
      organizationId: r.auth.organizationId,
      to: r.to,
      agentId: isId(r.agentId, "agt") ? r.agentId : null,
      contactId: contactOf(r),
    })),
    monthOf(deps.clock.now()),
  );
  read.catch(() => {});
  return rs.map((r, i) => {
    const facts = read.then((rows) => {
      // Only an organization deleted under a key could miss; there is no such operation.
      const f = rows[i]!.facts;
      if (!f) throw new ApiError("not_found", "No such organization.");
      return f;
    });
    const contactFound = contactOf(r) ? read.then((rows) => rows[i]!.contactFound === true) : undefined;
    facts.catch(() => {});
    return { facts, contactFound };
  });
}

/**
 * A live call's checks on what `readLiveCalls` read, in their order: the agent (404), the key's
 * restriction (403), the contact (404), then paid plan → plan minutes → carrier → agent active →
 * blocked → country → call window (at `at`).
 */
async function checkLiveCall(
  deps: Deps,
  tx: Db,
  r: LivePlacement,
  read: ReturnType<typeof readLiveCalls>[number],
  at: Date,
  scheduled: boolean,
  /** The plan's usage under the organization's lock, when it is held (checkPhoneCall). */
  planUsed?: number,
): Promise<{ facts: CallFacts; agent: AgentRow }> {
  const facts = await read.facts;
  const agent = facts.agent;
  await checkAgentAndContact(tx, r.auth, agent, r.contactId, read.contactFound);
  checkPhoneCall(deps, facts, agent!, {
    to: r.to,
    at,
    scheduled,
    ...(planUsed !== undefined ? { planUsed } : {}),
  });
  return { facts, agent: agent! };
}

/**
 * Live calls placed now, in one transaction: every request's reads (one statement) and the locks and
 * limits of each organization named go out in the first round trip; then each request in its turn is
 * checked and, when it passes, placed on its organization's limits as the requests before it left
 * them (no second read); then the placed calls, their reservations and dial timers, with each
 * organization's hour and plan minutes counted once for the batch, in one statement
 * (`insertPlacedPhoneCalls`) and the commit behind it, in the second round trip. A refused request
 * writes nothing and gets its error; the others are placed. One request alone is a batch of one. Batching is what lets an
 * organization place more than one call per lock: every placement holds its organization's lock from
 * its first round trip to its commit (BENCHMARKS.md, "Live phone calls").
 */
export async function placeLiveCalls(
  deps: Deps,
  requests: LivePlacement[],
  /** The requests that arrived while this batch waited for its connection (engine/coalesce.ts). */
  more: () => LivePlacement[] = () => [],
  /** Where the batch runs: the placements' own connection when the process has one (compose.ts). */
  sql: Sql = deps.sql,
): Promise<(CallView | ApiError)[]> {
  const placed = await pipelinedTransaction(sql, async (tx, end) => {
    // The connection is ours now: what arrived meanwhile goes in this batch, not the next.
    requests.push(...more());
    const now = deps.clock.now();
    const reads = readLiveCalls(deps, tx, requests);
    // Each organization once (readAdmissions locks them in the order of their ids).
    const organizations = [...new Set(requests.map((r) => r.auth.organizationId))];
    const limits = await readAdmissions(tx, organizations, now);
    const first = new Map(limits);
    // Each request's call, or its refusal; the calls are written together after the last check.
    const outcomes: (PlacedPhoneCall | ApiError)[] = [];
    for (const [i, r] of requests.entries()) {
      try {
        const read = limits.get(r.auth.organizationId)!;
        const { facts, agent } = await checkLiveCall(deps, tx, r, reads[i]!, now, false, read.planUsed);
        const { after, maxSeconds, reservedMinutes } = admitPlacement(facts.organization, read);
        limits.set(r.auth.organizationId, after);
        outcomes.push({
          id: deps.ids.next("call"),
          organizationId: facts.organization.id,
          agentId: agent.id,
          to: r.to,
          contactId: r.contactId,
          variables: r.variables,
          language: agent.content_language,
          at: now,
          month: monthOf(now),
          reservedMinutes,
          maxSeconds,
        });
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        outcomes.push(err);
      }
    }
    const calls = outcomes.filter((o): o is PlacedPhoneCall => !(o instanceof ApiError));
    // The calls with their reservations and dial timers, and each organization's hour and plan minutes
    // once for the batch, in one statement with the commit right behind it.
    const counts = organizations.flatMap((id) => placementCounts(id, first.get(id)!, limits.get(id)!) ?? []);
    const written =
      calls.length === 0
        ? new Map<string, { call: CallRow; timers: InsertedTimerRow[] }>()
        : await insertPlacedPhoneCalls<InsertedTimerRow>(
            tx,
            calls,
            counts,
            { kind: TIMER_KINDS.callDial, insert: (sql, rows) => deps.timers.insertFrom(sql, rows) },
            end.last,
          );
    return {
      answers: outcomes.map((o) => (o instanceof ApiError ? o : callView(written.get(o.id)!.call))),
      timers: [...written.values()].flatMap((w) => w.timers),
    };
  });
  // Armed once committed: due at once, a dial timer armed before would fire into a transaction that
  // cannot see its row yet, and look again later.
  deps.timers.scheduled(placed.timers);
  return placed.answers;
}

// ——— reads ———

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
  return transcriptView({ ...row, transcript: row.transcript });
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
  return paginate<CallRow, CallView>({ ...callsPage(deps.sql, auth, q), map: callView });
}
