import { LiveKitError } from "./errors.ts";

/** The callee's participant identity in the call's room. */
export function sipIdentity(callId: string): string {
  return `sip_${callId}`;
}

/**
 * LiveKit SIP keeps the state of a call in this participant attribute: `dialing`, `ringing`, then
 * `active` once the callee answered (`automation` while sending DTMF), `hangup` at the end.
 */
export const SIP_CALL_STATUS_ATTRIBUTE = "sip.callStatus";
export type SipCallStatus = "dialing" | "ringing" | "automation" | "active" | "hangup";

/** Seconds the callee's phone rings before LiveKit gives up on the dial. */
export const RINGING_TIMEOUT_SECONDS = 30;

/**
 * SIP answers that end a dial with a status of their own; any other failure ends the call `failed`.
 * 486 Busy Here, 600 Busy Everywhere, 603 Decline: the callee is busy or refused.
 * 408 Request Timeout, 480 Temporarily Unavailable, 487 Request Terminated: nobody answered.
 */
const BUSY_SIP_CODES: ReadonlySet<number> = new Set([486, 600, 603]);
const NO_ANSWER_SIP_CODES: ReadonlySet<number> = new Set([408, 480, 487]);

/** How a dial that did not connect ends the call. `outcome` names the failure of a `failed` call. */
export type DialEnd =
  | { status: "busy"; outcome: null; sipStatusCode: number }
  | { status: "no_answer"; outcome: null; sipStatusCode: number | null }
  | { status: "failed"; outcome: string; sipStatusCode: number | null };

/**
 * The end of a call whose dial failed, for any error the dial can throw (a LiveKitError, or the
 * SDK's own SipCallError / ServerError / network error):
 * - SIP 486, 600, 603 → `busy`; SIP 408, 480, 487 → `no_answer`;
 * - the ringing timeout, in each shape LiveKit gives it (`isRingingTimeout`) → `no_answer`;
 * - anything else → `failed` with `outcome` the SIP code ("503"), else the error's code: LiveKit's
 *   Twirp code (`unavailable`, `not_found`, …) or a local one (`timeout`, `network_error`, …).
 */
export function dialFailureEnd(err: unknown): DialEnd {
  const e = LiveKitError.from("CreateSIPParticipant", err);
  const sip = e.sipStatusCode;
  if (sip !== null) {
    if (BUSY_SIP_CODES.has(sip)) return { status: "busy", outcome: null, sipStatusCode: sip };
    if (NO_ANSWER_SIP_CODES.has(sip)) return { status: "no_answer", outcome: null, sipStatusCode: sip };
    return { status: "failed", outcome: String(sip), sipStatusCode: sip };
  }
  if (isRingingTimeout(e)) return { status: "no_answer", outcome: null, sipStatusCode: null };
  return { status: "failed", outcome: e.code, sipStatusCode: null };
}

/** LiveKit SIP's message for an INVITE given up when its time ran out (the ringing timeout). */
const SIP_REQUEST_TIMED_OUT = /sip request timed out/i;
/** An INVITE transaction that ended without a final answer, after `n` provisional ones (ringing). */
const NO_FINAL_ANSWER = /transaction failed to complete \((\d+) intermediate responses?\)/i;

/**
 * Whether a failure without SIP status says the phone rang until nobody could answer any more. LiveKit
 * SIP has answered the ringing timeout in several shapes over its versions, none with a SIP status:
 * - Twirp `canceled`, "sip request timed out" (its answer since March 2026; the same when the room
 *   closes while the phone rings);
 * - Twirp `deadline_exceeded`, whatever the message: "sip request timed out" (early 2026), "context
 *   deadline exceeded" when the ringing timeout ends while the INVITE is still being sent, or the
 *   server's own deadline for the request passing: in every case time ran out before an answer;
 * - Twirp `canceled`, "canceled" (before February 2026);
 * - Twirp `canceled`, "transaction failed to complete (n intermediate responses)" with n > 0: the
 *   callee's side rang (provisional answers) and never gave a final answer. With n = 0 the carrier
 *   never answered at all: a trunk failure, not an unanswered phone.
 */
export function isRingingTimeout(e: Pick<LiveKitError, "code" | "detail">): boolean {
  if (e.code === "deadline_exceeded") return true;
  if (e.code !== "canceled") return false;
  if (SIP_REQUEST_TIMED_OUT.test(e.detail) || /^\s*canceled\s*$/i.test(e.detail)) return true;
  const rang = NO_FINAL_ANSWER.exec(e.detail);
  return rang !== null && Number(rang[1]) > 0;
}

/** A participant of a room as ListParticipants reports it. */
export interface RoomParticipant {
  identity: string;
  /** LiveKit's participant kind: `STANDARD`, `SIP`, `AGENT`, … */
  kind: string;
  /** `JOINING`, `JOINED`, `ACTIVE` or `DISCONNECTED`. */
  state: string;
  attributes: Record<string, string>;
  /** When it joined the room, or null when LiveKit did not say. */
  joinedAt: Date | null;
}

/** Whether the callee of this call is connected: `sip_<callId>` is in the room and its call is `active`. */
export function sipCallAnswered(participants: readonly RoomParticipant[], callId: string): boolean {
  const identity = sipIdentity(callId);
  return participants.some(
    (p) => p.identity === identity && p.attributes[SIP_CALL_STATUS_ATTRIBUTE] === "active",
  );
}
