import type { Fragment } from "postgres";
import { type CallView, callView, transcriptView } from "../db/calls.ts";
import { campaignAdvanceTimers } from "../db/campaigns.ts";
import { type Db, settledAll } from "../db/engine/connection.ts";
import {
  completeCalls,
  insertSimulatedCall,
  type NewSimulatedCall,
  nextStepTimers,
  readOngoingCalls,
  ringCalls,
  startCalls,
} from "../db/simulatedCalls.ts";
import type { InsertedTimerRow } from "../db/timers.ts";
import type { Deps } from "../deps.ts";
import {
  drawDurationSeconds,
  languageOfVariables,
  pickLanguage,
  simulateOutcome,
} from "../simulation/content.ts";
import { SIMULATED_SCHEDULE } from "../simulation/schedule.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { BatchContext, BatchTimerHandler, FiredTimer } from "../timers/types.ts";
import { callEvent, recordEvents } from "./events.ts";

/**
 * Simulated calls (test mode): created `initiated` with the timer of their first step, then played by
 * the timers: `ringing` at +2 s, `ongoing` at +5 s, `completed` after the drawn duration, each delay
 * multiplied by SIMULATION_TIME_SCALE. Nothing reaches a carrier and nothing counts in usage.
 */

export interface SimulatedCallInput {
  organizationId: string;
  agentId: string;
  direction: "outbound" | "web";
  to: string | null;
  contactId?: string | null;
  campaignId?: string | null;
  variables?: Record<string, unknown>;
  /** The agent's language, when the caller already read the agent; read otherwise. */
  agentLanguage?: string;
}

/** Milliseconds from creation to `ringing`, at this process's time scale. */
export function ringDelayMs(deps: Pick<Deps, "env">): number {
  return SIMULATED_SCHEDULE.ringingAfter * 1000 * deps.env.SIMULATION_TIME_SCALE;
}

/**
 * Creates a simulated call (`livemode` false) and the timer of its first step in one statement, inside
 * the caller's transaction: outbound calls of test keys, and the calls of test campaigns.
 */
export async function createSimulatedCall(tx: Db, deps: Deps, input: SimulatedCallInput): Promise<CallView> {
  const written = await insertSimulatedCall<InsertedTimerRow>(
    tx,
    newSimulatedCall(deps, input),
    firstStepTimer(deps),
  );
  if (!written) throw new Error(`no agent ${input.agentId} in organization ${input.organizationId}`);
  deps.timers.scheduled(written.timers);
  return callView(written.call);
}

/**
 * A test key's `POST /v1/calls` in one statement, no transaction, shared with the other test calls
 * created meanwhile (`simulatedCallInserts`): the call is written only if the agent is the
 * organization's and active, and the contact (when given) the organization's. Null when nothing was
 * written: the caller then reads why.
 */
export async function tryCreateSimulatedCall(
  deps: Deps,
  input: Omit<SimulatedCallInput, "agentLanguage">,
): Promise<CallView | null> {
  const written = await deps.batches.simulatedCallInserts.run(newSimulatedCall(deps, input));
  if (!written) return null;
  deps.timers.scheduled(written.timers);
  return callView(written.call);
}

/** The row of a new simulated call: its id, drawn duration and, when known here, its language. */
function newSimulatedCall(deps: Deps, input: SimulatedCallInput): NewSimulatedCall {
  const variables = input.variables ?? {};
  const id = deps.ids.next("call");
  return {
    id,
    organizationId: input.organizationId,
    agentId: input.agentId,
    to: input.to,
    contactId: input.contactId ?? null,
    campaignId: input.campaignId ?? null,
    direction: input.direction,
    variables,
    durationSeconds: drawDurationSeconds(id),
    // The variables' language, else the agent's (known here, or read by the statement).
    language:
      languageOfVariables(variables) ??
      (input.agentLanguage === undefined ? null : pickLanguage(variables, input.agentLanguage)),
    createdAt: deps.clock.now(),
  };
}

/** The timer of a new simulated call's first step, through the process's scheduler. */
export function firstStepTimer(deps: Pick<Deps, "env"> & { timers: Pick<Deps["timers"], "insertFrom"> }) {
  return {
    kind: TIMER_KINDS.simulationStep,
    delayMs: ringDelayMs(deps),
    // Read when the statement is built: the scheduler is the one the dependencies hold then.
    insert: (tx: Db, rows: Fragment) => deps.timers.insertFrom(tx, rows),
  };
}

/**
 * The steps of simulated calls, a batch at a time: every call due for the same step moves in one
 * statement. Each step moves a call only from the state it expects, so a step that runs again (a
 * takeover after a crash) changes nothing. The next step is scheduled from this step's due time, so
 * lateness does not add up and, at scale 1, endedAt − startedAt = durationSeconds.
 */
export function simulationSteps(deps: Deps): BatchTimerHandler {
  const scale = deps.env.SIMULATION_TIME_SCALE;
  const ringToAnswerMs = (SIMULATED_SCHEDULE.ongoingAfter - SIMULATED_SCHEDULE.ringingAfter) * 1000 * scale;

  // One statement: the calls that were `initiated` ring, and their next step is scheduled from this
  // step's due time (the firing sends it with its take: two round trips with the commit).
  const ring = async ({ tx, timers, followUps, scheduled }: BatchContext) => {
    const next = await ringCalls<InsertedTimerRow>(
      tx,
      timers.map((t) => ({ id: String(t.payload.callId), due: t.dueAt })),
      deps.clock.now(),
      (moved) => followUps(nextStepTimers(tx, TIMER_KINDS.simulationStep, moved, ringToAnswerMs, "ongoing")),
    );
    scheduled(next);
  };

  const answer = async ({ tx, timers, schedule }: BatchContext) => {
    const moved = await startCalls(
      tx,
      timers.map((t) => ({ id: String(t.payload.callId), at: t.dueAt })),
      deps.clock.now(),
    );
    await Promise.all([
      recordEvents(
        tx,
        deps,
        moved.map((call) => callEvent("call.started", call)),
      ),
      schedule(
        moved.map((call) => ({
          kind: TIMER_KINDS.simulationStep,
          at: new Date(call.started_at!.getTime() + (call.simulated_duration_seconds ?? 30) * 1000 * scale),
          payload: { callId: call.id, to: "completed" },
        })),
      ),
    ]);
  };

  const complete = async ({ tx, timers, schedule }: BatchContext) => {
    const due = new Map(timers.map((t) => [String(t.payload.callId), t.dueAt]));
    const calls = await readOngoingCalls(tx, [...due.keys()]);
    const outcomes = new Map(
      calls.map((call) => [
        call.id,
        simulateOutcome({
          seed: call.id,
          language: call.language,
          durationSeconds: call.simulated_duration_seconds ?? 30,
          at: call.created_at,
          variables: call.variables,
        }),
      ]),
    );
    const moved = await completeCalls(
      tx,
      deps.clock.now(),
      calls.map((call) => {
        const o = outcomes.get(call.id)!;
        return {
          id: call.id,
          endedAt: due.get(call.id)!,
          durationSeconds: call.simulated_duration_seconds ?? 30,
          summary: o.summary,
          collectedData: o.collectedData,
          transcript: o.segments,
        };
      }),
    );
    // One statement; ids are drawn in this order, so the outbox keeps it per call: the call ended,
    // then its transcript and its analysis are ready (a millisecond later: completeCalls). Each once.
    await recordEvents(
      tx,
      deps,
      moved.flatMap(({ ended_updated_at, ...call }) => [
        callEvent("call.ended", { ...call, updated_at: ended_updated_at }),
        {
          organizationId: call.organization_id,
          agentId: call.agent_id,
          type: "call.transcript_ready" as const,
          livemode: call.livemode,
          data: transcriptView({ ...call, transcript: outcomes.get(call.id)!.segments }),
        },
        callEvent("call.analysis_ready", call),
      ]),
    );
    // A campaign call that ended advances its campaign, in this same transaction (services/campaigns.ts).
    await schedule(campaignAdvanceTimers(moved));
  };

  const steps: Record<string, (ctx: BatchContext) => Promise<void>> = {
    ringing: ring,
    ongoing: answer,
    completed: complete,
  };
  return async (ctx) => {
    const byStep = new Map<string, FiredTimer[]>();
    for (const t of ctx.timers) {
      const step = String(t.payload.to);
      if (!steps[step]) throw new Error(`unknown simulation step ${JSON.stringify(t.payload.to)}`);
      byStep.set(step, [...(byStep.get(step) ?? []), t]);
    }
    await settledAll([...byStep].map(([step, timers]) => steps[step]!({ ...ctx, timers })));
  };
}
