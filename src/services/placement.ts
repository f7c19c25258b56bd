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
  return placePhoneCallOn(tx, deps, call, read).row;
}

/**
 * `placePhoneCall` on limits already read under the lock: a refusal is thrown at once, before any
 * statement is sent; else every write goes out together (the reservation, the call, its timer, the
 * hour) and `row` is the call once they are done. `after` is the read that the next placement of the
 * same transaction stands on: a batch of placements reads the limits once.
 */
export function placePhoneCallOn(
  tx: Db,
  deps: Deps,
  call: PhoneCallToPlace,
  read: AdmissionRead,
  /**
   * The batch counts its placements itself, once for all (`recordPlacements`): the hour's row and the
   * plan's usage are not written here.
   */
  opts: { countedByBatch?: boolean } = {},
): { row: Promise<CallRow>; after: AdmissionRead } {
  const org = call.organization;
  const { now, planUsed } = read;
  // The minutes as the lock shows them come before the limits, as in the order of the checks.
  const planRemaining = org.plan_minutes - planUsed;
  if (planRemaining <= 0) throw planMinutesExhausted();
  const admitted = admitPhoneCall(org, read);
  const after = admitted.after(Math.ceil(planMaxSeconds(MAX_PHONE_CALL_SECONDS, planRemaining) / 60));
  const written = settledAll([
    reserveMinutes(tx, deps.clock, {
      callId: call.callId,
      organizationId: org.id,
      livemode: true,
      maxSeconds: MAX_PHONE_CALL_SECONDS,
      planMinutes: org.plan_minutes,
      planUsedLocked: planUsed,
      usageAddedByCaller: opts.countedByBatch ?? false,
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
    opts.countedByBatch ? Promise.resolve() : admitted.record(tx),
  ] as const);
  const row = written.then(([, row]) => {
    // A task's call that is no longer `scheduled` was cancelled meanwhile: nothing is placed.
    if (!row) throw new Error(`call ${call.callId} is no longer scheduled`);
    return row;
  });
  return { row, after };
}
