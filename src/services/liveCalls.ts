import type { WebhookEvent } from "livekit-server-sdk";
import type { AgentRow } from "../db/agents.ts";
import { type CallRow, findCallState, insertCall, moveCall } from "../db/calls.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { LiveKitError, liveKitAgentName, type WebCallRoom } from "../livekit/client.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { HandlerContext, TimerHandler } from "../timers/types.ts";
import { releaseCallResults } from "./callResults.ts";
import { callEvent, recordEvent } from "./events.ts";
import { reserveMinutes, settleReservation } from "./minutes.ts";

/**
 * The life of a live call, whatever started it: minutes reserved and the call written with the timer
 * of its maximum duration (one transaction), the room and the agent's dispatch at the media server,
 * the start and the end reported by LiveKit's webhooks, the end forced at `maxSeconds`, and the
 * minutes settled at the end.
 */

export interface PreparedCall {
  callId: string;
  maxSeconds: number;
  timerId: string;
}

/**
 * Inside the start transaction: reserve the minutes (which decides `maxSeconds`), write the live call
 * and the timer that ends it, so either all of them exist or none does.
 */
export async function prepareLiveCall(
  tx: Db,
  deps: Deps,
  input: {
    callId: string;
    organizationId: string;
    agent: AgentRow;
    variables: Record<string, unknown>;
    publishableKeyId: string | null;
  },
): Promise<PreparedCall> {
  const { maxSeconds } = await reserveMinutes(tx, deps.clock, {
    callId: input.callId,
    organizationId: input.organizationId,
    livemode: true,
    publishableKeyId: input.publishableKeyId,
  });
  await insertCall(tx, {
    id: input.callId,
    organization_id: input.organizationId,
    livemode: true,
    status: "initiated",
    agent_id: input.agent.id,
    to_number: null,
    contact_id: null,
    campaign_id: null,
    direction: "web",
    variables: input.variables,
    simulated_duration_seconds: null,
    language: input.agent.content_language,
    task_id: null,
    created_at: deps.clock.now(),
  });
  const timer = await deps.timers.schedule(tx, {
    kind: TIMER_KINDS.liveCallMaxDuration,
    delayMs: maxSeconds * 1000,
    payload: { callId: input.callId },
  });
  return { callId: input.callId, maxSeconds, timerId: timer.id };
}

/**
 * After the call is committed: the room and the agent's dispatch. A failure here is 502
 * `call_start_failed`; the call ends `failed`, its minutes go back and its timer is dropped (a
 * session token used for it stays spent).
 */
export async function startRoom(
  deps: Deps,
  agent: AgentRow,
  prepared: PreparedCall,
  variables: Record<string, unknown>,
): Promise<{ callId: string; livemode: true; maxSeconds: number; room: WebCallRoom }> {
  const liveKit = deps.liveKit;
  try {
    // Admission refuses live calls without a media server (503 agent_unavailable) before this point.
    if (!liveKit) throw new Error("no media server is configured");
    const room = await liveKit.startWebCall({
      callId: prepared.callId,
      agentName: liveKitAgentName(agent),
      variables,
    });
    return { callId: prepared.callId, livemode: true, maxSeconds: prepared.maxSeconds, room };
  } catch (err) {
    deps.log.warn("web call could not start at the media server", {
      callId: prepared.callId,
      error: err instanceof LiveKitError ? err.message : "unexpected error",
    });
    await pipelinedTransaction(deps.sql, async (tx) => {
      const failed = await moveCall(tx, prepared.callId, "initiated", "failed", {
        ended_at: deps.clock.now(),
      });
      if (failed) await settleReservation(tx, deps.clock, prepared.callId, null);
      await deps.timers.cancel(tx, prepared.timerId);
    });
    throw new ApiError("call_start_failed", "The call could not be started. Try again in a moment.");
  }
}

/**
 * Ends a live call that is still `initiated` or `ongoing` (fenced on the status it was read in):
 * `ongoing` → `completed` with its real duration, `initiated` (nobody joined) → `no_answer`. Settles
 * the minutes in the same transaction and records `call.ended` once. Null when nothing moved.
 */
export async function endLiveCall(
  tx: Db,
  deps: Pick<Deps, "clock" | "ids">,
  callId: string,
  at: Date,
): Promise<CallRow | null> {
  const call = await findCallState(tx, callId);
  if (!call?.livemode || call.direction !== "web") return null;
  let moved: CallRow | null = null;
  let actualSeconds: number | null = null;
  if (call.status === "ongoing" && call.started_at) {
    actualSeconds = Math.max(0, Math.round((at.getTime() - call.started_at.getTime()) / 1000));
    moved = await moveCall(tx, callId, "ongoing", "completed", {
      ended_at: at,
      duration_seconds: actualSeconds,
    });
  } else if (call.status === "initiated") {
    moved = await moveCall(tx, callId, "initiated", "no_answer", { ended_at: at });
  }
  if (!moved) return null;
  await settleReservation(tx, deps.clock, callId, actualSeconds);
  await recordEvent(tx, deps, callEvent("call.ended", moved));
  // Results the voice agent reported before the end become ready now (services/callResults.ts).
  await releaseCallResults(tx, deps, callId);
  return moved;
}

/** A live web call becomes `ongoing` when the visitor or the agent joins; `call.started` once. */
export async function markLiveCallStarted(
  tx: Db,
  deps: Pick<Deps, "clock" | "ids">,
  callId: string,
  at: Date,
): Promise<CallRow | null> {
  const call = await findCallState(tx, callId);
  if (!call?.livemode || call.direction !== "web") return null;
  const moved = await moveCall(tx, callId, "initiated", "ongoing", { started_at: at });
  if (!moved) return null;
  await recordEvent(tx, deps, callEvent("call.started", moved));
  return moved;
}

/**
 * What LiveKit's webhook reports about a call's room: `participant_joined` starts the call,
 * `room_finished` ends it. Other events change nothing.
 */
export async function applyLiveKitEvent(deps: Deps, event: WebhookEvent): Promise<void> {
  const roomName = event.room?.name ?? "";
  const at = deps.clock.now();
  if (!roomName || (event.event !== "participant_joined" && event.event !== "room_finished")) return;
  await pipelinedTransaction(deps.sql, async (tx) => {
    if (event.event === "participant_joined") await markLiveCallStarted(tx, deps, roomName, at);
    else await endLiveCall(tx, deps, roomName, at);
  });
}

/**
 * The `maxSeconds` timer: closes the room (everyone is disconnected) and ends the call. A call that
 * already ended changes nothing. A failure to close the room is thrown, so the runner tries again.
 */
export function liveCallMaxDuration(deps: Deps): TimerHandler {
  return async ({ tx, timer }: HandlerContext) => {
    const callId = String(timer.payload.callId);
    const call = await findCallState(tx, callId);
    if (!call || (call.status !== "initiated" && call.status !== "ongoing")) return;
    if (deps.liveKit) {
      // A room LiveKit no longer knows is already closed; any other failure is thrown (retried).
      await deps.liveKit.deleteRoom(callId);
    } else {
      deps.log.warn("web call reached its maximum duration but no media server is configured", { callId });
    }
    await endLiveCall(tx, deps, callId, timer.dueAt);
  };
}
