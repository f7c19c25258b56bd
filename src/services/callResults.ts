import type { SecretKeyAuth } from "../auth/access.ts";
import {
  type CallView,
  callView,
  lockCall,
  markResultsReady,
  type ReportedResults,
  storeResults,
  transcriptView,
} from "../db/calls.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import type { Deps } from "../deps.ts";
import { ApiError, notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import { callEvent, type EventDeps, type NewEvent, recordEvents } from "./events.ts";

/**
 * The results of a live call, reported by the voice agent dispatched for it: transcript, summary,
 * collected data, success, outcome and recording. They are accepted once the call has started (while
 * it is `ongoing` or after it ended), once. `call.transcript_ready` (when there is a transcript) and
 * `call.analysis_ready` are recorded once the call has ended and its results exist, whichever comes
 * last, each once, in the transaction of whichever of the two came last.
 *
 * Exactly once although the report and the end can arrive together: both take the call's row lock
 * (the report reads the call `for update`; the end's status update locks it), so one waits for the
 * other and then sees what it committed; and the events are recorded only by the update that marks the
 * results ready, which matches once.
 */

/** What `POST /v1/calls/{id}/results` carries, once validated; a field left out is null. */
export type CallResultsInput = Partial<ReportedResults>;

/** 403 `test_mode_not_supported` for test keys, before anything about the call is looked at. */
export function assertResultsKey(auth: Pick<SecretKeyAuth, "livemode">): void {
  if (!auth.livemode) {
    throw new ApiError(
      "test_mode_not_supported",
      "Only live calls have reported results (simulated calls make up their own): use a live key (inf_live_…).",
    );
  }
}

export async function reportCallResults(
  deps: Deps,
  auth: SecretKeyAuth,
  callId: string,
  input: CallResultsInput,
): Promise<CallView> {
  assertResultsKey(auth);
  if (!isId(callId, "call")) throw notFound("call");
  return pipelinedTransaction(deps.sql, async (tx) => {
    const call = await lockCall(tx, auth, callId);
    if (!call) throw notFound("call");
    if (!call.started_at) {
      throw new ApiError(
        "call_not_started",
        `This call never started (it is ${call.status}): there are no results to report.`,
      );
    }
    if (call.results_reported_at) {
      throw new ApiError("results_already_reported", "The results of this call were already reported.");
    }
    const transcript = input.transcript?.length ? input.transcript : null;
    const stored = await storeResults(
      tx,
      callId,
      {
        transcript,
        summary: input.summary ?? null,
        collectedData: input.collectedData ?? null,
        successful: input.successful ?? null,
        outcome: input.outcome ?? null,
        recordingUrl: input.recordingUrl ?? null,
      },
      deps.clock.now(),
    );
    // The row is locked and was read unreported: the update matches.
    if (!stored) throw new Error(`results of ${callId} were stored under the lock by someone else`);
    await releaseCallResults(tx, deps, callId);
    return callView(stored);
  });
}

/**
 * Records `call.transcript_ready` (when there is a transcript) and `call.analysis_ready` when the call
 * has ended and its results exist and they were not recorded yet; nothing otherwise. Called in the
 * transaction that reports the results and in the one that ends a live call.
 */
export async function releaseCallResults(tx: Db, deps: EventDeps, callId: string) {
  const ready = await markResultsReady(tx, callId, deps.clock.now());
  if (!ready) return;
  const { transcript, ...call } = ready;
  const events: NewEvent[] = [];
  if (transcript) {
    events.push({
      organizationId: call.organization_id,
      agentId: call.agent_id,
      type: "call.transcript_ready",
      livemode: call.livemode,
      data: transcriptView({ ...call, transcript }),
    });
  }
  events.push(callEvent("call.analysis_ready", call));
  await recordEvents(tx, deps, events);
}
