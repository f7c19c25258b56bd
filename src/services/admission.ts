import type { AgentRow } from "../db/agents.ts";
import { findAgent } from "../db/agents.ts";
import {
  type CallFacts,
  type CallLoad,
  lockCallLimits,
  readCallFacts,
  readCallLoads,
  recordHour,
} from "../db/callAdmission.ts";
import { type Db, settledAll } from "../db/engine/connection.ts";
import { lockPlanUsages } from "../db/minutes.ts";
import { findOrganization, type OrganizationRow } from "../db/organizations.ts";
import type { PlacementCounts } from "../db/phonePlacements.ts";
import type { Deps } from "../deps.ts";
import { ApiError, type ErrorCode } from "../errors.ts";
import { countryOf } from "../phoneNumbers.ts";
import { describeWindow, isOpen, nextOpening } from "./callWindow.ts";
import { monthOf, planMinutesExhausted } from "./minutes.ts";

/** Checks that decide whether a live call may start, shared by every way of starting one. */

/** 403 `plan_required` unless the organization has an active paid plan (read now, not from the key). */
export async function assertPaidPlan(sql: Db, organizationId: string): Promise<void> {
  const org = await findOrganization(sql, organizationId);
  if (!org?.paid_plan) throw new ApiError("plan_required", "The organization has no active paid plan.");
}

/**
 * The agent of a web call, or 503 `agent_unavailable`: unknown, inactive, or (for a live call) no media
 * server configured.
 */
export async function assertAgentAvailable(
  sql: Db,
  organizationId: string,
  agentId: string,
  opts: { livemode: boolean; mediaServerConfigured: boolean },
): Promise<AgentRow> {
  const agent = await findAgent(sql, organizationId, agentId);
  if (!agent?.active || (opts.livemode && !opts.mediaServerConfigured)) {
    throw new ApiError("agent_unavailable", "The agent is not available right now.");
  }
  return agent;
}

// ——— live phone calls ———

/** How a live phone call reaches the callee: the organization's trunk, else the environment's. */
export interface Carrier {
  trunkId: string;
  /** Caller number (E.164), or null for the trunk's own. */
  from: string | null;
}

/**
 * The carrier of the organization's live phone calls, or null: LiveKit must be configured and the
 * organization must have a trunk (its own `sipTrunkId`, else LIVEKIT_SIP_TRUNK_ID).
 */
export function carrierOf(deps: Pick<Deps, "env" | "liveKit">, org: OrganizationRow): Carrier | null {
  const trunkId = org.sip_trunk_id ?? deps.env.LIVEKIT_SIP_TRUNK_ID ?? null;
  if (!deps.liveKit || !trunkId) return null;
  return { trunkId, from: org.caller_number ?? deps.env.LIVEKIT_SIP_FROM_NUMBER ?? null };
}

/**
 * What the checks of a live phone call read, once, before any lock: the organization, its plan usage,
 * whether `to` is blocked (null: no number yet) and the agent `agentId` (when given).
 */
export async function callFacts(
  deps: Pick<Deps, "clock">,
  sql: Db,
  organizationId: string,
  call: { to: string | null; agentId?: string | null },
): Promise<CallFacts> {
  const facts = await readCallFacts(
    sql,
    organizationId,
    { to: call.to, agentId: call.agentId ?? null },
    monthOf(deps.clock.now()),
  );
  // Only an organization deleted under a key could miss; there is no such operation.
  if (!facts) throw new ApiError("not_found", "No such organization.");
  return facts;
}

/**
 * The refusals of a live phone call, after the agent and the key's restriction, in this order:
 * paid plan (403) → plan minutes (403) → carrier (503) → agent active (503) → blocked number (403)
 * → country (403) → call window at `at` (403). What needs the organization's lock (concurrency,
 * hourly limit, the minutes' reservation) follows in `admitPhoneCall`. Returns the carrier.
 *
 * `planUsed`: the plan's usage read under the organization's lock, when the caller holds it already
 * (a batch of placements: as the placements before this one left it). `facts.plan_used` was read
 * before the lock and before the batch's earlier reservations: on it, a call of a batch whose minutes
 * ran out would pass this check and be refused later, by a limit that comes after it in this order.
 */
export function checkPhoneCall(
  deps: Pick<Deps, "env" | "liveKit">,
  facts: CallFacts,
  agent: Pick<AgentRow, "active">,
  call: { to: string; at: Date; scheduled?: boolean; planUsed?: number },
): Carrier {
  const org = facts.organization;
  if (!org.paid_plan) {
    throw new ApiError("plan_required", "Live calls need an active paid plan for the organization.");
  }
  if (org.plan_minutes - (call.planUsed ?? facts.plan_used) <= 0) throw planMinutesExhausted();
  const carrier = carrierOf(deps, org);
  if (!carrier) {
    throw new ApiError("carrier_unavailable", "No carrier is configured to place live phone calls.");
  }
  if (!agent.active)
    throw new ApiError("agent_unavailable", "This agent is not active.", { param: "agentId" });
  if (facts.blocked) {
    throw new ApiError("number_blocked", "This number is on the organization's do-not-call list.", {
      param: "to",
    });
  }
  if (org.allowed_countries) {
    const country = countryOf(call.to);
    if (!country || !org.allowed_countries.includes(country)) {
      throw new ApiError(
        "country_not_allowed",
        `${country ? `Calls to ${country}` : "Calls to numbers of no country"} are not allowed for this organization ` +
          `(allowed: ${org.allowed_countries.join(", ")}).`,
        { param: "to" },
      );
    }
  }
  if (org.call_window && !isOpen(org.call_window, call.at)) {
    const opens = nextOpening(org.call_window, call.at);
    throw new ApiError(
      "outside_call_window",
      `${call.scheduled ? "runAt is" : "It is"} outside the organization's call window ` +
        `(${describeWindow(org.call_window)}); ` +
        (opens
          ? `the window next opens at ${opens.toISOString()}.`
          : "the window does not open in the next two weeks."),
      call.scheduled ? { param: "runAt" } : {},
    );
  }
  return carrier;
}

/** How long to wait before trying again when the organization's calls in progress are at their limit. */
export const CONCURRENCY_RETRY_AFTER_SECONDS = 10;
const HOUR_MS = 3_600_000;

/** What the organization's lock showed: its calls in progress, its hour, its plan's usage. */
export interface AdmissionRead {
  now: Date;
  load: CallLoad;
  /** Plan minutes used this month, read under the plan row's lock (for the reservation that follows). */
  planUsed: number;
}

/**
 * Takes the organization's locks and reads what its limits need, sending every statement at once
 * (one round trip): the limits row's lock, then under it the calls in progress and the hour, and the
 * plan's usage row, locked for the minutes' reservation that follows a pass (every placement takes
 * the two locks in this order). The locks are held until the caller's transaction ends, so the check
 * and the placement are one critical section, across requests and processes. Rejections are left to
 * the caller, who may not wait for this (it must still await it, or the transaction's end).
 */
export function readAdmission(tx: Db, organizationId: string, now: Date): Promise<AdmissionRead> {
  const read = readAdmissions(tx, [organizationId], now).then((reads) => reads.get(organizationId)!);
  read.catch(() => {});
  return read;
}

/**
 * `readAdmission` for the organizations of a batch of placements, in the same statements for them all
 * (their number does not grow with the organizations'): every limits row locked, in the order of the
 * ids, before any plan row.
 */
export function readAdmissions(
  tx: Db,
  organizationIds: readonly string[],
  now: Date,
): Promise<Map<string, AdmissionRead>> {
  const hourAgo = new Date(now.getTime() - HOUR_MS);
  // Each once, in the order of the ids: every placement locks its organizations' rows in this order.
  const ids = [...new Set(organizationIds)].sort();
  const read = settledAll([
    lockCallLimits(tx, ids, hourAgo),
    readCallLoads(tx, ids, hourAgo),
    lockPlanUsages(tx, ids, monthOf(now)),
  ] as const).then(([, loads, planUsed]) => {
    const reads = new Map<string, AdmissionRead>();
    for (const id of ids) {
      const load = loads.get(id);
      // The row was made and locked just before: only a statement refused there could miss it.
      if (!load) throw new Error(`no call limits read for organization ${id}`);
      reads.set(id, { now, load, planUsed: planUsed.get(id)! });
    }
    return reads;
  });
  read.catch(() => {});
  return read;
}

/** A placement that passed the organization's limits (`admitPhoneCall`). */
export interface Admitted {
  /** Counts the placement in the hour (the lock is held). */
  record(tx: Db): Promise<void>;
  /**
   * What `readAdmission` would read once this placement and its reservation of `reservedMinutes` are
   * written, in the same transaction: for the next placement of a batch, without reading again.
   */
  after(reservedMinutes: number): AdmissionRead;
}

/**
 * The organization's limits, on what `readAdmission` read: 429 `concurrency_limit_reached` when
 * maxConcurrentCalls live phone calls are `initiated`, `ringing` or `ongoing`; 429
 * `hourly_limit_reached` (Retry-After: until the oldest placement of the hour leaves it) when
 * maxCallsPerHour were placed in the last 60 minutes. Nothing is written: `record()` counts this
 * placement, at `now`, once the caller knows it happens (a refusal that follows, such as the
 * minutes', must not count in the hour).
 */
export function admitPhoneCall(
  org: Pick<OrganizationRow, "id" | "max_concurrent_calls" | "max_calls_per_hour">,
  read: AdmissionRead,
): Admitted {
  const { now, load } = read;
  const hourAgo = new Date(now.getTime() - HOUR_MS);
  // The cut never goes back (another process's clock may run a little behind).
  const cut = load.hour.cut > hourAgo ? load.hour.cut : hourAgo;
  const inHour = load.hour.count - load.left;
  if (load.inProgress >= org.max_concurrent_calls) {
    throw refusal(
      "concurrency_limit_reached",
      `The organization has ${load.inProgress} live phone calls in progress, its limit (maxConcurrentCalls).`,
      CONCURRENCY_RETRY_AFTER_SECONDS,
    );
  }
  if (inHour >= org.max_calls_per_hour) {
    const frees = load.oldest ? load.oldest.getTime() + HOUR_MS : now.getTime() + HOUR_MS;
    throw refusal(
      "hourly_limit_reached",
      `The organization placed ${inHour} live phone calls in the last 60 minutes, its limit (maxCallsPerHour).`,
      Math.max(1, Math.ceil((frees - now.getTime()) / 1000)),
    );
  }
  // A placement at or before the cut would never leave the count: it is outside the hour already.
  const hour = { cut, count: inHour + (now > cut ? 1 : 0) };
  return {
    record: (tx) => recordHour(tx, org.id, hour),
    // The row now keeps the hour from `cut` (no placement left it since), one more call is in
    // progress, and this placement is the hour's oldest when there was none.
    after: (reservedMinutes) => ({
      now,
      load: {
        hour,
        inProgress: load.inProgress + 1,
        left: 0,
        oldest: load.oldest ?? (now > cut ? now : null),
      },
      planUsed: read.planUsed + reservedMinutes,
    }),
  };
}

/**
 * What a batch of placements of one organization counts once for all, in the transaction that holds
 * the organization's locks (db/phonePlacements.ts writes it with the calls): the hour as the last
 * placement left it, and the plan minutes they reserved (`last.planUsed` − `first.planUsed`). Nothing
 * when none was placed.
 */
export function placementCounts(
  organizationId: string,
  first: AdmissionRead,
  last: AdmissionRead,
): PlacementCounts | null {
  if (last === first) return null;
  return {
    organizationId,
    hour: last.load.hour,
    month: monthOf(first.now),
    planMinutes: last.planUsed - first.planUsed,
  };
}

function refusal(code: ErrorCode, message: string, retryAfterSeconds: number): ApiError {
  return new ApiError(code, message, { headers: { "Retry-After": String(retryAfterSeconds) } });
}
