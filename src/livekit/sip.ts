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
 * - the ringing timeout → `no_answer`: LiveKit answers it with Twirp `canceled` and no SIP status
 *   ("sip request timed out", which is also its answer when the room closes while the phone rings);
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

function isRingingTimeout(e: LiveKitError): boolean {
  return e.code === "canceled" && /sip request timed out/i.test(e.detail);
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
