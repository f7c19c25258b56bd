import type { AgentRow } from "../db/agents.ts";
import { type CallRow, insertCall, moveCall } from "../db/calls.ts";
import { type Db, settledAll } from "../db/engine/connection.ts";
import type { OrganizationRow } from "../db/organizations.ts";
import type { Deps } from "../deps.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import { type AdmissionRead, admitPhoneCall, readAdmission } from "./admission.ts";
import { planMaxSeconds, planMinutesExhausted, reserveMinutes } from "./minutes.ts";

/**
 * Placing a live phone call, once the checks that need no lock have passed: the organization's limits
 * under its lock, the minutes reserved, the call `initiated` with the timer that dials it (dialing.ts).
 * The rest of its life is the live-call lifecycle's (liveCalls.ts).
 */

/** The longest phone call, whatever remains of the plan. */
export const MAX_PHONE_CALL_SECONDS = 3600;

/** A live phone call to place now: a new one, or the `scheduled` call of a task whose time has come. */
export interface PhoneCallToPlace {
  callId: string;
  organization: OrganizationRow;
  agent: AgentRow;
  to: string;
  contactId: string | null;
  campaignId: string | null;
  variables: Record<string, unknown>;
  /** The call exists, `scheduled` (a task's): it moves to `initiated` instead of being created. */
  scheduled?: boolean;
}

/**
 * Inside the placing transaction, once the checks that need no lock have passed: the organization's
 * limits under its lock (429 `concurrency_limit_reached`, `hourly_limit_reached`), the minutes
 * reserved (which decides `maxSeconds` = min(3,600, remaining plan minutes × 60)), the call
 * `initiated` and the timer that dials it, due at once. Nothing is written before the last refusal,
 * so a caller that catches one (a task, a campaign) may go on in the same transaction. Dialling
 * happens after the commit, from that timer (services/dialing.ts): never inside a request.
 */
export async function placePhoneCall(
  tx: Db,
  deps: Deps,
  call: PhoneCallToPlace,
  /** The organization's locks and limits, when the caller sent for them with its own reads. */
  admission?: Promise<AdmissionRead>,
): Promise<CallRow> {
  const read = await (admission ?? readAdmission(tx, call.organization.id, deps.clock.now()));
  const org = call.organization;
  const { now, planUsed } = read;
  // A refusal is thrown here, before any statement is sent; then every write goes out together.
  const { admitted, maxSeconds } = admitPlacement(org, read);
  const [, row] = await settledAll([
    reserveMinutes(tx, deps.clock, {
      callId: call.callId,
      organizationId: org.id,
      livemode: true,
      maxSeconds,
      planMinutes: org.plan_minutes,
      planUsedLocked: planUsed,
    }),
    call.scheduled
      ? moveCall(tx, call.callId, "scheduled", "initiated", now, { placed_at: now })
      : insertCall(tx, {
          id: call.callId,
          organization_id: org.id,
          livemode: true,
          status: "initiated",
          agent_id: call.agent.id,
          to_number: call.to,
          contact_id: call.contactId,
          campaign_id: call.campaignId,
          direction: "outbound",
          variables: call.variables,
          simulated_duration_seconds: null,
          language: call.agent.content_language,
          task_id: null,
          created_at: now,
          placed_at: now,
        }),
    deps.timers.schedule(tx, { kind: TIMER_KINDS.callDial, delayMs: 0, payload: { callId: call.callId } }),
    admitted.record(tx),
  ] as const);
  // A task's call that is no longer `scheduled` was cancelled meanwhile: nothing is placed.
  if (!row) throw new Error(`call ${call.callId} is no longer scheduled`);
  return row;
}

/**
 * One more live phone call on `read`, the organization's limits and plan usage under its lock: the
 * refusal, in the order of the checks (the minutes as the lock shows them, then the limits), or the
 * minutes it reserves (`maxSeconds` = min(3,600, remaining plan minutes × 60)) and `after`, the read
 * the next placement of the same transaction stands on.
 */
export function admitPlacement(
  org: OrganizationRow,
  read: AdmissionRead,
): {
  admitted: ReturnType<typeof admitPhoneCall>;
  after: AdmissionRead;
  maxSeconds: number;
  reservedMinutes: number;
} {
  const planRemaining = org.plan_minutes - read.planUsed;
  if (planRemaining <= 0) throw planMinutesExhausted();
  const admitted = admitPhoneCall(org, read);
  const maxSeconds = planMaxSeconds(MAX_PHONE_CALL_SECONDS, planRemaining);
  const reservedMinutes = Math.ceil(maxSeconds / 60);
  return { admitted, after: admitted.after(reservedMinutes), maxSeconds, reservedMinutes };
}
