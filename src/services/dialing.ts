import { findCallState } from "../db/calls.ts";
import { settledAll } from "../db/engine/connection.ts";
import { type DialRow, ringPhoneCalls } from "../db/liveCallMoves.ts";
import type { Deps } from "../deps.ts";
import { LiveKit, LiveKitError, liveKitAgentName } from "../livekit/client.ts";
import { dialFailureEnd, sipCallAnswered } from "../livekit/sip.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { BatchTimerHandler, HandlerContext, TimerHandler } from "../timers/types.ts";
import { closeRoom, endLiveCall, type LiveCallEnd, markLiveCallStarted } from "./liveCalls.ts";

/**
 * Dialling live phone calls: never inside a request, never inside a database transaction, and never
 * twice.
 *
 * A placed call (`initiated`) has a `call.dial` timer due at once. Its handler moves it to `ringing`
 * and writes its safety net (`call.dial_check`, held by this process's runner: no other live runner
 * takes it); once that commits, the process creates the room, dispatches the agent and dials the
 * callee (CreateSIPParticipant, waiting until answered). The answer is written in a new transaction,
 * fenced on `ringing`: `ongoing` (`call.started`), or `busy` / `no_answer` / `failed` (`call.ended`,
 * no minute kept, the room deleted so the agent leaves), and the net goes with it.
 *
 * The net fires when the dial's outcome was never written: the process died (its runner's lease is
 * gone, so another process, or this one restarted, takes the net) or the write failed. While the
 * dial is still under way in this very process the net only moves itself later. Otherwise it asks
 * LiveKit: the callee `sip_<call id>` in the room with `sip.callStatus` `active` → `ongoing`; else the
 * room is deleted (which hangs up a phone still ringing) and the call ends `failed` with outcome
 * `interrupted`. A `ringing` call is never dialled again: only the `call.dial` timer of an
 * `initiated` call dials.
 */

/** How long after a dial starts its net looks, and how often it looks again while the dial is under way. */
export const DIAL_CHECK_DELAY_MS = 5_000;
/** A net whose look at LiveKit failed looks again after this. */
const DIAL_CHECK_RETRY_MS = 30_000;

/** A dial that did not connect: how the call ends. */
type NotConnected = { kind: "not_connected"; end: Extract<LiveCallEnd, { reason: "not_connected" }> };

/** What the dial came to. */
type DialOutcome =
  | { kind: "answered"; at: Date }
  | NotConnected
  /**
   * The request timed out, the connection dropped, or LiveKit's own deadline passed: LiveKit may have
   * connected the callee all the same. Asked of LiveKit; `otherwise` when the callee is not there.
   */
  | { kind: "unknown"; otherwise: NotConnected };

/** The `call.dial` timers due together: one statement moves their calls, then each dial runs after the commit. */
export function dialCalls(deps: Deps): BatchTimerHandler {
  return async ({ tx, timers, schedule, afterCommit }) => {
    const ids = [...new Set(timers.map((t) => String(t.payload.callId)))];
    const now = deps.clock.now();
    const moved = await ringPhoneCalls(tx, ids, now);
    // A call is placed with its reservation, which says how long it may last; one without any cannot be
    // dialled (LiveKit would not know when to hang up, nor the service how to charge it): it ends
    // failed here, in the transaction that moved it, never left ringing.
    const calls: ReservedDial[] = [];
    for (const call of moved) {
      if (call.max_seconds !== null) {
        calls.push({ ...call, max_seconds: call.max_seconds });
        continue;
      }
      deps.log.error("a phone call without a minute reservation ends failed, never dialled", {
        callId: call.id,
      });
      await endLiveCall(tx, deps, call.id, now, {
        reason: "not_connected",
        status: "failed",
        outcome: "internal_error",
      });
    }
    if (calls.length === 0) return;
    const nets = await schedule(calls.map((c) => safetyNet(c.id, DIAL_CHECK_DELAY_MS)));
    const netOf = new Map(nets.map((n) => [String(n.payload.callId), n.id]));
    afterCommit(() => {
      for (const call of calls) startDial(deps, call, netOf.get(call.id)!);
    });
  };
}

/** A call to dial: with its reservation's `maxSeconds`. */
type ReservedDial = DialRow & { max_seconds: number };

function safetyNet(callId: string, delayMs: number) {
  return { kind: TIMER_KINDS.callDialCheck, delayMs, payload: { callId }, hold: true };
}

/** Runs one dial and writes its outcome; the call is known to be dialling in this process meanwhile. */
function startDial(deps: Deps, call: ReservedDial, netId: string): void {
  const underWay = { done: Promise.resolve(), netId };
  deps.dialing.set(call.id, underWay);
  underWay.done = (async () => {
    try {
      const outcome = await dial(deps, call);
      // The net may have moved itself later meanwhile: the current one goes with the outcome.
      await settleDial(deps, call.id, underWay.netId, outcome, call.max_seconds);
    } catch (err) {
      // The net resolves the call from LiveKit's side later.
      deps.log.error("the outcome of a dial could not be written", {
        callId: call.id,
        error: (err as Error).message,
      });
    } finally {
      deps.dialing.delete(call.id);
    }
  })();
}

/** Room, agent, then the callee: what the carrier answered. */
async function dial(deps: Deps, call: ReservedDial): Promise<DialOutcome> {
  const liveKit = deps.liveKit;
  const trunkId = call.sip_trunk_id ?? deps.env.LIVEKIT_SIP_TRUNK_ID ?? null;
  if (!liveKit || !trunkId) {
    // The carrier was removed between the placement and the dial.
    return notConnected("failed", "carrier_unavailable");
  }
  const room = LiveKit.roomName(call.id);
  try {
    await liveKit.createRoom(room, { metadata: { callId: call.id } });
    await liveKit.dispatchAgent(
      room,
      liveKitAgentName({ id: call.agent_id, livekit_agent_name: call.livekit_agent_name }),
      { callId: call.id, variables: call.variables, direction: "outbound", to: call.to_number },
    );
  } catch (err) {
    const e = LiveKitError.from("CreateRoom", err);
    deps.log.warn("phone call could not be prepared at the media server", {
      callId: call.id,
      error: e.message,
    });
    return notConnected("failed", e.code);
  }
  try {
    await liveKit.dialSip({
      callId: call.id,
      roomName: room,
      trunkId,
      to: call.to_number,
      from: call.caller_number ?? deps.env.LIVEKIT_SIP_FROM_NUMBER ?? null,
      maxSeconds: call.max_seconds,
    });
    return { kind: "answered", at: deps.clock.now() };
  } catch (err) {
    const e = LiveKitError.from("CreateSIPParticipant", err);
    if (e.code === "timeout" || e.code === "network_error") {
      return { kind: "unknown", otherwise: notConnected("failed", e.code) };
    }
    const end = dialFailureEnd(e);
    deps.log.info("phone call not connected", {
      callId: call.id,
      status: end.status,
      sipStatusCode: end.sipStatusCode,
      ...(end.outcome ? { outcome: end.outcome } : {}),
    });
    // LiveKit's deadline for the request passed (the ringing timeout, as some versions answer it, or
    // its own), with no answer from the carrier: an answer just before it would still have connected
    // the callee.
    if (e.code === "deadline_exceeded" && e.sipStatusCode === null) {
      return { kind: "unknown", otherwise: notConnected(end.status, end.outcome) };
    }
    return notConnected(end.status, end.outcome);
  }
}

function notConnected(status: "busy" | "no_answer" | "failed", outcome: string | null): NotConnected {
  return { kind: "not_connected", end: { reason: "not_connected", status, outcome } };
}

/**
 * Writes what became of a dial, fenced on `ringing`, and drops its net. An unknown outcome is asked
 * of LiveKit first; when LiveKit cannot be asked either, the net stays and asks later.
 */
async function settleDial(
  deps: Deps,
  callId: string,
  netId: string,
  outcome: DialOutcome,
  maxSeconds?: number,
): Promise<void> {
  let known: Exclude<DialOutcome, { kind: "unknown" }>;
  if (outcome.kind === "unknown") {
    const answered = await askLiveKit(deps, callId);
    if (answered === null) return;
    // Not answered: the room must be gone before the call is said to have failed, or a phone still
    // ringing could be picked up afterwards. Until then the net tries again.
    if (!answered && !(await closeRoom(deps, callId))) return;
    known = answered ? { kind: "answered", at: deps.clock.now() } : outcome.otherwise;
  } else {
    known = outcome;
    // The agent is in the room already: closing it sends the agent away.
    if (known.kind === "not_connected") await closeRoom(deps, callId);
  }
  const [netGone, call] = await deps.batches.liveCallChanges.run([callId], (tx) =>
    settledAll([
      deps.timers.cancel(tx, netId),
      known.kind === "answered"
        ? markLiveCallStarted(tx, deps, callId, known.at, "answered", maxSeconds ? { maxSeconds } : {})
        : endLiveCall(tx, deps, callId, deps.clock.now(), known.end),
    ] as const),
  );
  // Committed: the net's wheel entry goes with its row (it would fire only to find no row).
  if (netGone) deps.timers.cancelled([netId]);
  // Answered, and already hung up before the answer was written: it ended at once; the agent leaves.
  if (known.kind === "answered" && call?.status === "completed") await closeRoom(deps, callId);
}

/** Whether the callee is connected, from the room's participants; null when LiveKit could not be asked. */
async function askLiveKit(deps: Deps, callId: string): Promise<boolean | null> {
  if (!deps.liveKit) return false;
  try {
    return sipCallAnswered(await deps.liveKit.listParticipants(LiveKit.roomName(callId)), callId);
  } catch (err) {
    deps.log.warn("could not ask the media server whether a phone call was answered", {
      callId,
      error: (err as Error).message,
    });
    return null;
  }
}

/** The `call.dial_check` net (see the top of this file). */
export function checkDial(deps: Deps): TimerHandler {
  return async ({ tx, timer, schedule, afterCommit }: HandlerContext) => {
    const callId = String(timer.payload.callId);
    const call = await findCallState(tx, callId);
    if (call?.status !== "ringing") return;
    const underWay = deps.dialing.get(callId);
    if (underWay) {
      // Still dialling here: look again later. (Should the outcome be written before this commits,
      // the successor is not dropped with it; it finds the call no longer ringing and does nothing.)
      const next = await schedule(safetyNet(callId, DIAL_CHECK_DELAY_MS));
      afterCommit(() => {
        underWay.netId = next.id;
      });
      return;
    }
    // Nobody dials it any more. A net for this look too, in case it fails or this process dies.
    const net = await schedule(safetyNet(callId, DIAL_CHECK_RETRY_MS));
    afterCommit(() => {
      deps.log.warn("phone call left ringing without a dial: asking the media server", { callId });
      settleDial(deps, callId, net.id, {
        kind: "unknown",
        otherwise: notConnected("failed", "interrupted"),
      }).catch((err) =>
        deps.log.error("a phone call left ringing could not be resolved; its net tries again", {
          callId,
          error: (err as Error).message,
        }),
      );
    });
  };
}

/**
 * For shutdown: waits at most `ms` for the dials under way to be answered and written. True when none
 * is left; those still under way are resolved later by their nets.
 */
export async function drainDials(deps: Pick<Deps, "dialing">, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const done = await Promise.race([
    Promise.allSettled([...deps.dialing.values()].map((d) => d.done)).then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]);
  clearTimeout(timer);
  return done && deps.dialing.size === 0;
}
