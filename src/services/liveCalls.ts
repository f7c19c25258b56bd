import type { WebhookEvent } from "livekit-server-sdk";
import type { AgentRow } from "../db/agents.ts";
import { type CallRow, findCallState, insertCall, moveCall } from "../db/calls.ts";
import { type Db, pipelinedTransaction, settledAll } from "../db/engine/connection.ts";
import { answerPhoneCall, completeLiveCall, noteHangUpWhileRinging } from "../db/liveCallMoves.ts";
import { reservationMaxSeconds } from "../db/minutes.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import {
  LiveKit,
  LiveKitError,
  liveKitAgentName,
  type RoomInfo,
  visitorIdentity,
  type WebCallRoom,
} from "../livekit/client.ts";
import { sipIdentity } from "../livekit/sip.ts";
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
  // The call's row goes out with the reservation's reads (a refusal rolls both back); its timer
  // needs the reservation's maxSeconds.
  const [{ maxSeconds }] = await settledAll([
    reserveMinutes(tx, deps.clock, {
      callId: input.callId,
      organizationId: input.organizationId,
      livemode: true,
      publishableKeyId: input.publishableKeyId,
    }),
    insertCall(tx, {
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
    }),
  ] as const);
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
      maxSeconds: prepared.maxSeconds,
    });
    return { callId: prepared.callId, livemode: true, maxSeconds: prepared.maxSeconds, room };
  } catch (err) {
    deps.log.warn("web call could not start at the media server", {
      callId: prepared.callId,
      error: err instanceof LiveKitError ? err.message : "unexpected error",
    });
    await pipelinedTransaction(deps.sql, async (tx) => {
      const now = deps.clock.now();
      const failed = await moveCall(tx, prepared.callId, "initiated", "failed", now, { ended_at: now });
      if (failed) await settleReservation(tx, deps.clock, prepared.callId, null);
      await deps.timers.cancel(tx, prepared.timerId);
    });
    throw new ApiError("call_start_failed", "The call could not be started. Try again in a moment.");
  }
}

/** How a live call ends. */
export type LiveCallEnd =
  /**
   * It is over (the room closed, the callee hung up, `maxSeconds`): `ongoing` → `completed` with its
   * duration; a web call whose room closed before anyone's join was reported (`initiated`) starts and
   * completes at that instant, as the contract has a web call end `completed` on `room_finished`; a
   * phone call still `ringing` was answered and hung up before its answer was written: the end is kept
   * for the answer, which completes the call at once (`markLiveCallStarted`).
   */
  | { reason: "over" }
  /**
   * It never connected: a phone call whose dial failed or was refused (`scheduled`, `initiated` or
   * `ringing` → `busy`, `no_answer` or `failed` with `outcome`), a scheduled call whose task was deleted
   * (`cancelled`), or a web call's room found empty and never joined at `maxSeconds` (`no_answer`). No
   * minute is kept.
   */
  | { reason: "not_connected"; status: "busy" | "no_answer" | "failed" | "cancelled"; outcome: string | null }
  /**
   * Nobody reported how it went (a web call still `initiated` at `maxSeconds`, its visitor not in its
   * room, which was joined: the webhook is missing): `failed` with outcome `end_not_reported`, every
   * reserved minute kept.
   */
  | { reason: "unreported" };

const OVER: LiveCallEnd = { reason: "over" };
const NOT_STARTED = ["scheduled", "initiated", "ringing"] as const;

/**
 * The one end of a live call, web or phone, whatever reports it (fenced on the status it was read in,
 * so a repeat changes nothing): moves the call as `end` says, with `endedAt` never before `startedAt`
 * (the later of the two is kept, so `durationSeconds` is never negative), settles its minutes in the
 * same transaction (`ceil(duration / 60)`, at least 1, stay counted; none for a call that never
 * connected) and records `call.ended` once. Null when nothing moved.
 */
export async function endLiveCall(
  tx: Db,
  deps: Pick<Deps, "clock" | "ids" | "timers">,
  callId: string,
  at: Date,
  end: LiveCallEnd = OVER,
): Promise<CallRow | null> {
  // The usual end, an answered call that is over, is one statement; the others read the call first.
  const completed =
    end.reason === "not_connected" ? null : await completeLiveCall(tx, callId, at, deps.clock.now());
  const { moved, from, actualSeconds, resultsReported } = completed
    ? {
        moved: completed,
        from: "ongoing" as const,
        actualSeconds: completed.duration_seconds,
        resultsReported: completed.results_reported,
      }
    : await endOtherwise(tx, deps, callId, at, end);
  if (!moved) return null;
  // The reservation's settlement goes out last: a web call started with a publishable key gives its
  // key's minutes back, on the key's usage row that every start with that key locks, so that row is
  // held for the commit alone (the plan's minutes wait on the reservation, db/minutes.ts).
  await settledAll([
    recordEvent(tx, deps, callEvent("call.ended", moved)),
    // Results the voice agent reported before the end become ready now (services/callResults.ts);
    // their events are drawn after call.ended's. Most reports come after the end, which releases
    // them then: known not to be there yet, nothing is looked for.
    resultsReported === false ? Promise.resolve() : releaseCallResults(tx, deps, callId),
    // A campaign call that ended advances its campaign (one refused before it was placed is the
    // campaign's own doing, inside its step).
    moved.campaign_id && from !== "scheduled"
      ? deps.timers.schedule(tx, {
          kind: TIMER_KINDS.campaignAdvance,
          delayMs: 0,
          payload: { campaignId: moved.campaign_id },
        })
      : Promise.resolve(null),
    settleReservation(tx, deps.clock, callId, actualSeconds),
  ] as const);
  return moved;
}

/**
 * The ends other than an answered call's: a call that never connected, a web call nobody joined.
 * `resultsReported` when the end's statement told (else they are looked for).
 */
async function endOtherwise(
  tx: Db,
  deps: Pick<Deps, "clock" | "ids" | "timers">,
  callId: string,
  at: Date,
  end: LiveCallEnd,
): Promise<{
  moved: CallRow | null;
  from: string | null;
  actualSeconds: number | null;
  resultsReported?: boolean;
}> {
  const call = await findCallState(tx, callId);
  if (!call?.livemode) return { moved: null, from: null, actualSeconds: null };
  if (end.reason === "not_connected") {
    const from = NOT_STARTED.find((s) => s === call.status);
    if (!from) return { moved: null, from: null, actualSeconds: null };
    const moved = await moveCall(tx, callId, from, end.status, deps.clock.now(), {
      ended_at: at,
      successful: false,
      ...(end.outcome !== null ? { outcome: end.outcome } : {}),
    });
    return { moved, from, actualSeconds: null };
  }
  if (call.status === "ringing" && call.direction === "outbound") {
    if (await noteHangUpWhileRinging(tx, callId, at)) return { moved: null, from: null, actualSeconds: null };
    // The answer was written in between: the call is ongoing now, and ends.
    const moved = await completeLiveCall(tx, callId, at, deps.clock.now());
    return {
      moved,
      from: "ongoing",
      actualSeconds: moved?.duration_seconds ?? null,
      ...(moved ? { resultsReported: moved.results_reported } : {}),
    };
  }
  if (call.status === "initiated" && call.direction === "web") {
    if (end.reason === "unreported") {
      const moved = await moveCall(tx, callId, "initiated", "failed", deps.clock.now(), {
        ended_at: at,
        outcome: "end_not_reported",
      });
      // Kept whole: the reservation, not a report that never came, says what the call cost.
      return { moved, from: "initiated", actualSeconds: Number.POSITIVE_INFINITY };
    }
    // Nobody's join was reported before the room closed: the call starts and completes at once (0 s,
    // the shortest call's minute kept), `call.started` then `call.ended` like every completed call.
    const started = await markLiveCallStarted(tx, deps, callId, at, "joined");
    const moved = started ? await completeLiveCall(tx, callId, at, deps.clock.now()) : null;
    return {
      moved,
      from: "ongoing",
      actualSeconds: moved?.duration_seconds ?? null,
      ...(moved ? { resultsReported: moved.results_reported } : {}),
    };
  }
  return { moved: null, from: null, actualSeconds: null };
}

/**
 * A live call becomes `ongoing`, `call.started` once: a web call when the visitor or the agent joins
 * its room (`initiated` → `ongoing`), a phone call only when the callee answers (`ringing` →
 * `ongoing`: the agent joining the room does not start it). A phone call's `maxSeconds` count from
 * its answer: the timer that ends it is written here (`maxSeconds` given, or read from its
 * reservation). A phone call whose end LiveKit reported while it still rang (answered and hung up
 * before this) ends at once instead: the call as it ends is returned.
 */
export async function markLiveCallStarted(
  tx: Db,
  deps: Pick<Deps, "clock" | "ids" | "timers">,
  callId: string,
  at: Date,
  by: "joined" | "answered",
  opts: { maxSeconds?: number } = {},
): Promise<CallRow | null> {
  const now = deps.clock.now();
  const [moved, maxSeconds] = await settledAll([
    by === "joined"
      ? moveCall(tx, callId, "initiated", "ongoing", now, { started_at: at }, { liveDirection: "web" })
      : answerPhoneCall(tx, callId, at, now),
    by === "answered" && opts.maxSeconds === undefined
      ? reservationMaxSeconds(tx, callId)
      : Promise.resolve(opts.maxSeconds ?? null),
  ] as const);
  if (!moved) return null;
  const hungUpAt: Date | null =
    "hung_up_while_ringing_at" in moved ? (moved.hung_up_while_ringing_at as Date | null) : null;
  await settledAll([
    recordEvent(tx, deps, callEvent("call.started", moved)),
    by === "answered" && maxSeconds !== null && !hungUpAt
      ? deps.timers.schedule(tx, {
          kind: TIMER_KINDS.liveCallMaxDuration,
          // From the start as written (never before the call was created), as its end is bounded.
          at: new Date((moved.started_at ?? at).getTime() + maxSeconds * 1000),
          payload: { callId },
        })
      : Promise.resolve(null),
  ] as const);
  if (hungUpAt) return (await endLiveCall(tx, deps, callId, hungUpAt)) ?? moved;
  return moved;
}

/**
 * Closes a call's room (DeleteRoom): everyone in it is disconnected (a phone still ringing is hung
 * up) and nobody can join it again. A room LiveKit no longer knows was closed already. False when
 * LiveKit could not be reached or refused (logged); nothing else is thrown.
 */
export async function closeRoom(deps: Pick<Deps, "liveKit" | "log">, callId: string): Promise<boolean> {
  if (!deps.liveKit) return true;
  try {
    await deps.liveKit.deleteRoom(LiveKit.roomName(callId));
    return true;
  } catch (err) {
    deps.log.warn("could not close the room of a call", {
      callId,
      error: err instanceof LiveKitError ? err.message : "unexpected error",
    });
    return false;
  }
}

/**
 * How far from the server's clock a time LiveKit reports is believed (clock skew, a retry that came
 * late): further off, it is not a time of this call (a signed sender's nonsense, year 1970 or 10000)
 * and the server's own time of hearing it is taken.
 */
const REPORTED_TIME_TOLERANCE_MS = 24 * 3_600_000;

/** A time LiveKit reports (milliseconds), or now when it is none or too far from now to be believed. */
function reportedTime(deps: Pick<Deps, "clock">, ms: number): Date {
  const now = deps.clock.now();
  return ms > 0 && Math.abs(ms - now.getTime()) <= REPORTED_TIME_TOLERANCE_MS ? new Date(ms) : now;
}

/** The instant a LiveKit webhook event happened: its own `createdAt` (seconds), else now. */
function eventTime(deps: Pick<Deps, "clock">, event: WebhookEvent): Date {
  return reportedTime(deps, Number(event.createdAt ?? 0) * 1000);
}

/**
 * What LiveKit's webhook reports about a call's room (named after the call), at the event's own time:
 * - `participant_joined` starts a web call (not a phone call: only the callee's answer does);
 * - `participant_left` (or `participant_connection_aborted`) of `sip_<call id>`, the callee, ends a
 *   phone call, and its room is then closed (the agent leaves, nobody can join again);
 * - `room_finished` ends either.
 * Other events change nothing; every transition is fenced, so retries and replays change nothing.
 */
export async function applyLiveKitEvent(deps: Deps, event: WebhookEvent): Promise<void> {
  const callId = event.room?.name ?? "";
  if (!callId) return;
  const at = eventTime(deps, event);
  switch (event.event) {
    case "participant_joined":
      await deps.batches.liveCallChanges.run([callId], (tx) =>
        markLiveCallStarted(tx, deps, callId, at, "joined"),
      );
      return;
    case "participant_left":
    case "participant_connection_aborted": {
      if (event.participant?.identity !== sipIdentity(callId)) return;
      const ended = await deps.batches.liveCallChanges.run([callId], (tx) =>
        endLiveCall(tx, deps, callId, at),
      );
      if (ended) await closeRoom(deps, callId);
      return;
    }
    case "room_finished":
      await deps.batches.liveCallChanges.run([callId], (tx) => endLiveCall(tx, deps, callId, at));
      return;
  }
}

/** A `maxSeconds` timer whose work failed looks again after this. */
const MAX_DURATION_RETRY_MS = 30_000;

/**
 * The `maxSeconds` timer of a live call still running: once its firing commits (with a safety net,
 * the same timer again later, in case what follows fails or the process dies), `endAtMaxSeconds`
 * asks LiveKit who is in the room, closes it and ends the call. No request to LiveKit runs inside
 * the firing transaction. A call that already ended changes nothing.
 */
export function liveCallMaxDuration(deps: Deps): TimerHandler {
  return async ({ tx, timer, schedule, afterCommit }: HandlerContext) => {
    const callId = String(timer.payload.callId);
    // A net keeps the instant the call was due to end.
    const endAt = typeof timer.payload.endAt === "string" ? new Date(timer.payload.endAt) : timer.dueAt;
    const call = await findCallState(tx, callId);
    if (!call || !runningAtMaxSeconds(call)) return;
    const net = await schedule({
      kind: TIMER_KINDS.liveCallMaxDuration,
      delayMs: MAX_DURATION_RETRY_MS,
      payload: { callId, endAt: endAt.toISOString() },
    });
    afterCommit(() => {
      endAtMaxSeconds(deps, callId, endAt, net.id).catch((err) =>
        deps.log.warn("a call at its maximum duration could not be ended yet; its timer tries again", {
          callId,
          error: err instanceof LiveKitError ? err.message : (err as Error).message,
        }),
      );
    });
  };
}

/** Still running: an answered call, or a web call whose start was never reported. */
function runningAtMaxSeconds(call: { status: string; direction: string }): boolean {
  return call.status === "ongoing" || (call.status === "initiated" && call.direction === "web");
}

/**
 * At `maxSeconds`: the room is closed (everyone disconnected) and the call ends at `endAt`. When
 * LiveKit never reported the end (or the start) the webhook is probably not configured; LiveKit's
 * room tells what it can: a web call's visitor still there started when it joined; a web call's room
 * still open and empty before LiveKit's empty timeout could close it was never joined (`no_answer`,
 * nothing kept: a room someone left closes 20 s later). When nothing can tell, the reserved minutes
 * are kept rather than none: a call's minutes never depend on a report that may not come, and a
 * warning names the webhook.
 */
async function endAtMaxSeconds(deps: Deps, callId: string, endAt: Date, netId: string): Promise<void> {
  const call = await findCallState(deps.sql, callId);
  if (!call || !runningAtMaxSeconds(call)) {
    await pipelinedTransaction(deps.sql, (tx) => deps.timers.cancel(tx, netId));
    return;
  }
  const room = LiveKit.roomName(callId);
  const participants = deps.liveKit ? await deps.liveKit.listParticipants(room) : [];
  const callerIdentity = call.direction === "web" ? visitorIdentity(callId) : sipIdentity(callId);
  const caller = participants.find((p) => p.identity === callerIdentity);
  const nobodyJoined =
    call.status === "initiated" &&
    participants.length === 0 &&
    deps.liveKit !== null &&
    neverJoined(await deps.liveKit.findRoom(room), deps.clock.now());
  if (!(await closeRoom(deps, callId))) throw new Error("the room could not be closed");
  await pipelinedTransaction(deps.sql, async (tx) => {
    await deps.timers.cancel(tx, netId);
    if (nobodyJoined) {
      return endLiveCall(tx, deps, callId, endAt, {
        reason: "not_connected",
        status: "no_answer",
        outcome: null,
      });
    }
    if (call.status === "ongoing") return endLiveCall(tx, deps, callId, endAt);
    if (caller?.joinedAt) {
      await markLiveCallStarted(tx, deps, callId, reportedTime(deps, caller.joinedAt.getTime()), "joined");
      return endLiveCall(tx, deps, callId, endAt);
    }
    return endLiveCall(tx, deps, callId, endAt, { reason: "unreported" });
  });
  if (!nobodyJoined && (!caller || call.status !== "ongoing")) {
    deps.log.warn(
      "a live call reached its maximum duration without LiveKit reporting its end: configure LiveKit to send " +
        "webhooks to /api/livekit/webhook (without them a call keeps all its reserved minutes)",
      { callId, status: call.status, callerInRoom: caller !== undefined },
    );
  }
}

/** A room still open with nobody in it, younger than its empty timeout: nobody has joined it yet. */
function neverJoined(room: RoomInfo | null, now: Date): boolean {
  if (!room?.createdAt || room.numParticipants > 0) return false;
  return now.getTime() - room.createdAt.getTime() < room.emptyTimeoutSeconds * 1000;
}
