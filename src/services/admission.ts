import type { AgentRow } from "../db/agents.ts";
import { findAgent } from "../db/agents.ts";
import { type CallFacts, readCallFacts } from "../db/callAdmission.ts";
import type { Db } from "../db/engine/connection.ts";
import { findOrganization, type OrganizationRow } from "../db/organizations.ts";
import type { Deps } from "../deps.ts";
import { ApiError, type ErrorCode, notFound } from "../errors.ts";
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
  if (!facts) throw notFound("organization");
  return facts;
}

// ——— the checks of a live phone call, in their order ———

/** What a live phone call's checks know before its placement's statement: the rows as read (or kept). */
export interface PhoneCall {
  organization: OrganizationRow;
  agent: Pick<AgentRow, "active">;
  to: string;
  /** When the call would start: now, or a scheduled call's runAt. */
  at: Date;
  /** Only scheduled (runAt): the window's refusal names runAt. */
  scheduled: boolean;
}

/**
 * What the database tells: for a placement, under the organization's locks and as the calls placed
 * before it in its batch left the organization (db/phonePlacements.ts); for a call only scheduled, as
 * read without a lock.
 */
export interface PhoneCallFindings {
  contactMissing: boolean;
  /** Plan minutes left this month. */
  planRemaining: number;
  blocked: boolean;
  /** The organization's load; null for a call only scheduled, which no limit applies to yet. */
  load: { inProgress: number; inHour: number; oldest: Date | null } | null;
}

type Check =
  | { reads: "rows"; refusal: (deps: Pick<Deps, "env" | "liveKit">, call: PhoneCall) => ApiError | null }
  | { reads: "database"; refusal: (found: PhoneCallFindings, call: PhoneCall) => ApiError | null };

/**
 * The refusals of a live phone call after the agent (404) and the key's restriction (403), in this
 * order: contact (404) → paid plan (403) → plan minutes (403) → carrier (503) → agent active (503) →
 * blocked number (403) → country (403) → call window at `at` (403) → concurrency (429) → hourly limit
 * (429). Some read only the organization and the agent, the others what the database finds.
 */
const PHONE_CALL_CHECKS: readonly Check[] = [
  { reads: "database", refusal: (found) => (found.contactMissing ? notFound("contact", "contactId") : null) },
  {
    reads: "rows",
    refusal: (_, call) =>
      call.organization.paid_plan
        ? null
        : new ApiError("plan_required", "Live calls need an active paid plan for the organization."),
  },
  { reads: "database", refusal: (found) => (found.planRemaining <= 0 ? planMinutesExhausted() : null) },
  {
    reads: "rows",
    refusal: (deps, call) =>
      carrierOf(deps, call.organization)
        ? null
        : new ApiError("carrier_unavailable", "No carrier is configured to place live phone calls."),
  },
  {
    reads: "rows",
    refusal: (_, call) =>
      call.agent.active
        ? null
        : new ApiError("agent_unavailable", "This agent is not active.", { param: "agentId" }),
  },
  {
    reads: "database",
    refusal: (found) =>
      found.blocked
        ? new ApiError("number_blocked", "This number is on the organization's do-not-call list.", {
            param: "to",
          })
        : null,
  },
  { reads: "rows", refusal: (_, call) => countryRefusal(call) },
  { reads: "rows", refusal: (_, call) => windowRefusal(call) },
  { reads: "database", refusal: (found, call) => concurrencyRefusal(found, call.organization) },
  { reads: "database", refusal: (found, call) => hourlyRefusal(found, call) },
];

/** The first refusal among the checks that read only the rows, and its place in the order. */
export interface RowsRefusal {
  at: number;
  error: ApiError;
}

/**
 * The first refusal among the checks that need nothing from the database: when there is one, the
 * placement's statement must not place the call (it may still find an earlier refusal).
 */
export function rowsRefusal(deps: Pick<Deps, "env" | "liveKit">, call: PhoneCall): RowsRefusal | null {
  for (const [at, check] of PHONE_CALL_CHECKS.entries()) {
    if (check.reads !== "rows") continue;
    const error = check.refusal(deps, call);
    if (error) return { at, error };
  }
  return null;
}

/**
 * The first refusal of a live phone call in the order of its checks, or null: it may be placed.
 * `fromRows`: `rowsRefusal` of the same call, when it was worked out already.
 */
export function phoneCallRefusal(
  deps: Pick<Deps, "env" | "liveKit">,
  call: PhoneCall,
  found: PhoneCallFindings,
  fromRows: RowsRefusal | null = rowsRefusal(deps, call),
): ApiError | null {
  for (const [at, check] of PHONE_CALL_CHECKS.entries()) {
    if (fromRows && at === fromRows.at) return fromRows.error;
    // A check of the rows before `fromRows` passed: it is the first that did not.
    if (check.reads === "rows") continue;
    const error = check.refusal(found, call);
    if (error) return error;
  }
  return null;
}

function countryRefusal({ organization: org, to }: PhoneCall): ApiError | null {
  if (!org.allowed_countries) return null;
  const country = countryOf(to);
  if (country && org.allowed_countries.includes(country)) return null;
  return new ApiError(
    "country_not_allowed",
    `${country ? `Calls to ${country}` : "Calls to numbers of no country"} are not allowed for this organization ` +
      `(allowed: ${org.allowed_countries.join(", ")}).`,
    { param: "to" },
  );
}

function windowRefusal({ organization: org, at, scheduled }: PhoneCall): ApiError | null {
  if (!org.call_window || isOpen(org.call_window, at)) return null;
  const opens = nextOpening(org.call_window, at);
  return new ApiError(
    "outside_call_window",
    `${scheduled ? "runAt is" : "It is"} outside the organization's call window ` +
      `(${describeWindow(org.call_window)}); ` +
      (opens
        ? `the window next opens at ${opens.toISOString()}.`
        : "the window does not open in the next two weeks."),
    scheduled ? { param: "runAt" } : {},
  );
}

/** How long to wait before trying again when the organization's calls in progress are at their limit. */
export const CONCURRENCY_RETRY_AFTER_SECONDS = 10;
const HOUR_MS = 3_600_000;

/** 429 `concurrency_limit_reached` when maxConcurrentCalls live phone calls are `initiated`, `ringing` or `ongoing`. */
function concurrencyRefusal(found: PhoneCallFindings, org: OrganizationRow): ApiError | null {
  if (!found.load || found.load.inProgress < org.max_concurrent_calls) return null;
  return refusal(
    "concurrency_limit_reached",
    `The organization has ${found.load.inProgress} live phone calls in progress, its limit (maxConcurrentCalls).`,
    CONCURRENCY_RETRY_AFTER_SECONDS,
  );
}

/**
 * 429 `hourly_limit_reached` when maxCallsPerHour were placed in the last 60 minutes; Retry-After: until
 * the oldest placement of the hour leaves it.
 */
function hourlyRefusal(found: PhoneCallFindings, call: PhoneCall): ApiError | null {
  const org = call.organization;
  if (!found.load || found.load.inHour < org.max_calls_per_hour) return null;
  const frees = (found.load.oldest ?? call.at).getTime() + HOUR_MS;
  return refusal(
    "hourly_limit_reached",
    `The organization placed ${found.load.inHour} live phone calls in the last 60 minutes, its limit (maxCallsPerHour).`,
    Math.max(1, Math.ceil((frees - call.at.getTime()) / 1000)),
  );
}

function refusal(code: ErrorCode, message: string, retryAfterSeconds: number): ApiError {
  return new ApiError(code, message, { headers: { "Retry-After": String(retryAfterSeconds) } });
}
