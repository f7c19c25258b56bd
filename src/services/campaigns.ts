import { assertAgentAllowed, type ReadScope, type SecretKeyAuth } from "../auth/access.ts";
import { type AgentRow, findAgent } from "../db/agents.ts";
import {
  type CampaignRow,
  type CampaignTarget,
  type CampaignView,
  campaignsPage,
  campaignView,
  cancelPending,
  countInProgress,
  earliestRetry,
  findCampaign,
  insertCampaign,
  lockCampaign,
  markCalling,
  nextPending,
  pendingPositions,
  type Refusal,
  refreshCampaign,
  refuseContacts,
  settleEndedCalls,
  setWake,
} from "../db/campaigns.ts";
import { findContactTargets } from "../db/contacts.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import { paginate } from "../db/engine/pages.ts";
import { hasOpenReservations } from "../db/minutes.ts";
import type { CallWindow } from "../db/organizations.ts";
import type { Deps } from "../deps.ts";
import { ApiError, type ErrorCode, notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import type { FlatObject } from "../schemas.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { BatchTimerHandler } from "../timers/types.ts";
import { callFacts, carrierOf } from "./admission.ts";
import { nextOpening } from "./callWindow.ts";
import { callEvent, recordEvent, recordEvents } from "./events.ts";
import { afterBulkChange } from "./housekeeping.ts";
import { planMinutesExhausted } from "./minutes.ts";
import { placeInTransaction } from "./placement.ts";
import { createSimulatedCall } from "./simulatedCalls.ts";

/**
 * Campaigns: an agent calls a list of contacts, at most `concurrency` calls at a time. Test campaigns
 * call through simulated calls; live ones through the live phone call path (services/liveCalls.ts),
 * each call checked and placed like a `POST /v1/calls` and dialled from its timer.
 *
 * The engine is one durable step, `advance`, run under the campaign's row lock: it settles the
 * contacts whose call has ended, starts calls for pending contacts up to `concurrency` (while the
 * campaign runs), recomputes the counters and completes the campaign when nothing is left. It runs
 * in the creation transaction (the first calls start at once) and then from a `campaign.advance`
 * timer that the simulated call schedules in the transaction that completes it. So no polling: each
 * ended call advances its campaign exactly when it ends, and a crash loses nothing (the timer and
 * the call's completion commit together). Running again changes nothing, so a repeated timer is harmless.
 */

/** What `POST /v1/campaigns` asks for, once validated: exactly one of `contacts` and `contactIds`. */
export interface CreateCampaignInput {
  name: string;
  agentId: string;
  contacts?:
    | { phone: string; name?: string | null | undefined; variables?: FlatObject | undefined }[]
    | undefined;
  contactIds?: string[] | undefined;
  concurrency: number;
  maxAttempts: number;
  retryDelaySeconds: number;
}

/** A test campaign calls at most 100 contacts. */
export const TEST_CAMPAIGN_MAX_CONTACTS = 100;

export { CAMPAIGN_STATUSES } from "../db/campaigns.ts";

/**
 * POST /v1/campaigns. Everything is checked before anything is written: the agent (404, 403), the
 * contact ids (404), then by mode. Test key: at most 100 contacts, an active agent, then a free
 * campaign with `livemode` false whose calls are simulated. Live key: paid plan (403
 * `plan_required`), plan minutes left (403 `plan_minutes_exhausted`), a carrier (503
 * `carrier_unavailable`), an active agent (503); then a live campaign whose calls go through the
 * live phone call path, each with every calling rule.
 */
export async function createCampaign(
  deps: Deps,
  auth: SecretKeyAuth,
  input: CreateCampaignInput,
): Promise<CampaignView> {
  const agent = isId(input.agentId, "agt")
    ? await findAgent(deps.sql, auth.organizationId, input.agentId)
    : null;
  if (!agent) throw notFound("agent", "agentId");
  assertAgentAllowed(auth, agent.id);
  const targets = input.contactIds
    ? await contactTargets(deps, auth.organizationId, input.contactIds)
    : (input.contacts ?? []).map((c) => ({
        phone: c.phone,
        name: c.name ?? null,
        contactId: null,
        variables: c.variables ?? {},
      }));

  if (auth.livemode) {
    const facts = await callFacts(deps, deps.sql, auth.organizationId, { to: null });
    const org = facts.organization;
    if (!org.paid_plan) {
      throw new ApiError("plan_required", "Live campaigns need an active paid plan for the organization.");
    }
    if (org.plan_minutes - facts.plan_used <= 0) throw planMinutesExhausted();
    if (!carrierOf(deps, org)) {
      throw new ApiError("carrier_unavailable", "No carrier is configured to place live phone calls.");
    }
  } else if (targets.length > TEST_CAMPAIGN_MAX_CONTACTS) {
    throw new ApiError(
      "test_campaign_too_large",
      `A test campaign calls at most ${TEST_CAMPAIGN_MAX_CONTACTS} contacts; this one has ${targets.length}.`,
      { param: input.contactIds ? "contactIds" : "contacts" },
    );
  }
  if (!agent.active)
    throw new ApiError("agent_unavailable", "This agent is not active.", { param: "agentId" });

  return pipelinedTransaction(deps.sql, async (transaction) => {
    const tx = transaction;
    const id = deps.ids.next("cmp");
    const now = deps.clock.now();
    await insertCampaign(
      tx,
      {
        id,
        organization_id: auth.organizationId,
        livemode: auth.livemode,
        name: input.name,
        agent_id: agent.id,
        concurrency: input.concurrency,
        max_attempts: input.maxAttempts,
        retry_delay_seconds: input.retryDelaySeconds,
        created_at: now,
        started_at: now,
      },
      targets,
    );
    await afterBulkChange(tx, targets.length);
    // Drawn first, so the event comes before those of the first calls (a refused one ends at once).
    const startedId = deps.ids.next("evt");
    const row = await advance(tx, deps, id, agent);
    const view = campaignView(row!);
    await recordEvent(tx, deps, {
      id: startedId,
      organizationId: auth.organizationId,
      agentId: view.agentId,
      type: "campaign.started",
      livemode: auth.livemode,
      data: view,
    });
    return view;
  });
}

/** The contacts behind `contactIds`, in the order given; any unknown or foreign id is 404 with its param. */
async function contactTargets(deps: Deps, organizationId: string, ids: string[]): Promise<CampaignTarget[]> {
  const wellFormed = ids.filter((id) => isId(id, "ct"));
  const rows = wellFormed.length ? await findContactTargets(deps.sql, organizationId, wellFormed) : [];
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id, i) => {
    const c = byId.get(id);
    if (!c) throw new ApiError("not_found", `No such contact: ${id}.`, { param: `contactIds.${i}` });
    return { phone: c.phone, name: c.name, contactId: c.id, variables: {} };
  });
}

/**
 * One step of the engine, under the campaign's row lock (see the top of this file). Returns the
 * campaign as it stands, or null if there is none. Emits `campaign.completed` on the one step that
 * completes the campaign (the status update is fenced on `running`).
 */
async function advance(tx: Db, deps: Deps, id: string, knownAgent?: AgentRow): Promise<CampaignRow | null> {
  const campaign = await lockCampaign(tx, id);
  if (!campaign) return null;
  if (campaign.status === "completed") return campaign;
  const now = deps.clock.now();
  await settleEndedCalls(tx, campaign, now);
  if (campaign.status === "running") {
    const free = campaign.concurrency - (await countInProgress(tx, id));
    if (campaign.livemode) {
      await callLive(tx, deps, campaign, free, now, knownAgent);
      await wakeWhenDue(tx, deps, campaign, now);
    } else {
      await callSimulated(tx, deps, campaign, free, now, knownAgent);
    }
  }
  const row = await refreshCampaign(tx, id, { now: deps.clock.now() });
  if (campaign.status === "running" && row.status === "completed") {
    await recordEvent(tx, deps, {
      organizationId: row.organization_id,
      agentId: row.agent_id,
      type: "campaign.completed",
      livemode: row.livemode,
      data: campaignView(row),
    });
  }
  return row;
}

/**
 * Starts the simulated calls of a test campaign for up to `free` pending contacts. Like a live one,
 * it calls no more once its agent is inactive: every contact not yet called fails with
 * `agent_unavailable` (calls in progress finish).
 */
async function callSimulated(
  tx: Db,
  deps: Deps,
  campaign: CampaignRow,
  free: number,
  now: Date,
  knownAgent?: AgentRow,
): Promise<void> {
  const next = await nextPending(tx, campaign.id, free, now);
  if (next.length === 0) return;
  const agent = knownAgent ?? (await findAgent(tx, campaign.organization_id, campaign.agent_id)) ?? undefined;
  if (agent && !agent.active) {
    await stopCalling(tx, deps, campaign, agent, "agent_unavailable");
    return;
  }
  const started: { position: number; callId: string }[] = [];
  for (const target of next) {
    const call = await createSimulatedCall(tx, deps, {
      organizationId: campaign.organization_id,
      agentId: campaign.agent_id,
      ...(agent ? { agentLanguage: agent.content_language } : {}),
      direction: "outbound",
      to: target.phone,
      contactId: target.contactId,
      campaignId: campaign.id,
      variables: target.variables,
    });
    started.push({ position: target.position, callId: call.id });
  }
  await markCalling(tx, campaign.id, started);
}

/** Refusals that concern one contact: it fails at once, never dialled and never retried. */
const CONTACT_REFUSALS: ReadonlySet<ErrorCode> = new Set(["number_blocked", "country_not_allowed"]);
/** Refusals that pass with time: the campaign waits, still running. */
const WAITS: ReadonlySet<ErrorCode> = new Set([
  "outside_call_window",
  "concurrency_limit_reached",
  "hourly_limit_reached",
]);
/**
 * Waits on the organization's calls in progress: a place among them, or the plan minutes they hold
 * reserved (each phone call reserves up to an hour's; what it does not use comes back at its end).
 * This campaign's own calls advance it when they end; while only others' are in progress, it looks
 * again after this.
 */
const ORGANIZATION_WAITS: ReadonlySet<ErrorCode> = new Set([
  "concurrency_limit_reached",
  "plan_minutes_exhausted",
]);
const ORGANIZATION_BUSY_WAIT_MS = 5_000;

type Wait = { code: ErrorCode; retryAfterSeconds: number | null; opensAt: Date | null };

/**
 * Places the live calls of `next`, each through every calling rule (as a `POST /v1/calls` would),
 * until one says to wait. A contact refused by the do-not-call list or its country fails at once.
 * Plan minutes used up are a wait while the organization's calls in progress hold some reserved.
 * When the organization can call no more (no paid plan, no minutes left nor coming back, no carrier,
 * the agent inactive), every contact not yet called fails with that code as its call's outcome.
 */
async function callLive(
  tx: Db,
  deps: Deps,
  campaign: CampaignRow,
  free: number,
  now: Date,
  knownAgent?: AgentRow,
): Promise<void> {
  let agent = knownAgent;
  let wait: Wait | null = null;
  let stop: ErrorCode | null = null;
  // A refused contact leaves its place to the next one, so the candidates are read again until the
  // places are taken, none is left, or a rule says to wait or stop.
  while (free > 0 && !wait && !stop) {
    const next = await nextPending(tx, campaign.id, free, now);
    if (next.length === 0) break;
    agent ??= (await findAgent(tx, campaign.organization_id, campaign.agent_id)) ?? undefined;
    if (!agent) break;
    const started: { position: number; callId: string }[] = [];
    const refused: Refusal[] = [];
    for (const target of next) {
      const callId = deps.ids.next("call");
      const [placement] = await placeInTransaction(tx, deps, [
        {
          callId,
          organizationId: campaign.organization_id,
          agentId: agent.id,
          to: target.phone,
          contactId: target.contactId,
          contactChecked: true,
          campaignId: campaign.id,
          variables: target.variables,
        },
      ]);
      if ("call" in placement!) {
        started.push({ position: target.position, callId });
        continue;
      }
      // A refusal writes nothing, so the transaction goes on.
      const { refused: err, organization } = placement!;
      if (CONTACT_REFUSALS.has(err.code)) {
        refused.push({ position: target.position, callId, code: err.code });
        continue;
      }
      wait = await waitFor(tx, campaign, err, now, organization?.call_window ?? null);
      if (!wait) stop = err.code;
      break;
    }
    await markCalling(tx, campaign.id, started);
    await refuse(tx, deps, campaign, agent, refused);
    free -= started.length;
  }
  if (stop && agent) await stopCalling(tx, deps, campaign, agent, stop);
  if (wait) {
    const at =
      wait.opensAt ??
      new Date(
        now.getTime() +
          (ORGANIZATION_WAITS.has(wait.code)
            ? ORGANIZATION_BUSY_WAIT_MS
            : (wait.retryAfterSeconds ?? 60) * 1000),
      );
    // While calls of this campaign are in progress, their ends advance it; otherwise a timer does.
    if (!ORGANIZATION_WAITS.has(wait.code) || (await countInProgress(tx, campaign.id)) === 0) {
      await wakeAt(tx, deps, campaign, at, now);
    }
  }
}

/**
 * The wait a refusal calls for, or null when it means the organization can call no more. `callWindow`:
 * the organization's, as the refused placement read it (`outside_call_window` waits for its opening).
 */
async function waitFor(
  tx: Db,
  campaign: CampaignRow,
  err: ApiError,
  now: Date,
  callWindow: CallWindow | null,
): Promise<Wait | null> {
  if (err.code === "plan_minutes_exhausted") {
    return (await hasOpenReservations(tx, campaign.organization_id))
      ? { code: err.code, retryAfterSeconds: null, opensAt: null }
      : null;
  }
  if (!WAITS.has(err.code)) return null;
  const retryAfter = Number(err.headers["Retry-After"]);
  const wait: Wait = {
    code: err.code,
    retryAfterSeconds: Number.isFinite(retryAfter) ? retryAfter : null,
    opensAt: null,
  };
  if (err.code === "outside_call_window") wait.opensAt = callWindow ? nextOpening(callWindow, now) : null;
  return wait;
}

/**
 * Contacts refused before being placed (never dialled, nothing reserved), however many, in a fixed
 * number of statements: each fails with a call written `failed`, the refusal's code as outcome, and
 * its `call.ended`.
 */
async function refuse(
  tx: Db,
  deps: Deps,
  campaign: CampaignRow,
  agent: AgentRow,
  refusals: readonly Refusal[],
): Promise<void> {
  if (refusals.length === 0) return;
  const calls = await refuseContacts(tx, campaign, agent.content_language, refusals, deps.clock.now());
  await recordEvents(
    tx,
    deps,
    calls.map((call) => callEvent("call.ended", call)),
  );
}

/** The campaign can call no more: every contact not yet called fails, with `code` as its call's outcome. */
async function stopCalling(
  tx: Db,
  deps: Deps,
  campaign: CampaignRow,
  agent: AgentRow,
  code: ErrorCode,
): Promise<void> {
  deps.log.info("campaign stops calling", { campaignId: campaign.id, livemode: campaign.livemode, code });
  const positions = await pendingPositions(tx, campaign.id);
  await refuse(
    tx,
    deps,
    campaign,
    agent,
    positions.map((position) => ({ position, callId: deps.ids.next("call"), code })),
  );
}

/** A running live campaign with retries not due yet is woken when the earliest is. */
async function wakeWhenDue(tx: Db, deps: Deps, campaign: CampaignRow, now: Date): Promise<void> {
  const retry = await earliestRetry(tx, campaign.id, now);
  if (retry) await wakeAt(tx, deps, campaign, retry, now);
}

/** One advance timer at `at`, unless one already waits to fire no later. */
async function wakeAt(tx: Db, deps: Deps, campaign: CampaignRow, at: Date, now: Date): Promise<void> {
  if (campaign.wake_at && campaign.wake_at > now && campaign.wake_at <= at) return;
  await deps.timers.schedule(tx, {
    kind: TIMER_KINDS.campaignAdvance,
    at,
    payload: { campaignId: campaign.id },
  });
  await setWake(tx, campaign.id, at);
  campaign.wake_at = at;
}

/**
 * The `campaign.advance` timers due together: each campaign advances once per batch, one after the
 * other (they share the firing transaction).
 */
export function campaignSteps(deps: Deps): BatchTimerHandler {
  // One after the other: two campaigns of one organization share its limits in this transaction.
  return async ({ tx, timers }) => {
    const ids = [...new Set(timers.map((t) => String(t.payload.campaignId)))];
    for (const id of ids) await advance(tx, deps, id);
  };
}

/** Malformed, unknown, foreign, other-mode: all the same 404. */
export async function getCampaign(
  deps: Pick<Deps, "sql">,
  auth: ReadScope,
  id: string,
): Promise<CampaignView> {
  const row = isId(id, "cmp") ? await findCampaign(deps.sql, auth, id) : null;
  if (!row) throw notFound("campaign");
  return campaignView(row);
}

/**
 * Cancels a running campaign: contacts not yet called are never called (they count in
 * `progress.cancelled`), calls in progress finish and count in `completed`/`succeeded`, and
 * `campaign.cancelled` is emitted once. A campaign already completed or cancelled is answered as it
 * is, unchanged, with no event: cancelling is idempotent. A campaign whose every call has ended, but
 * whose engine step has not run yet, is completed by the cancel instead (`campaign.completed`).
 */
export async function cancelCampaign(deps: Deps, auth: ReadScope, id: string): Promise<CampaignView> {
  if (!isId(id, "cmp")) throw notFound("campaign");
  return pipelinedTransaction(deps.sql, async (transaction) => {
    const tx = transaction;
    const campaign = await findCampaign(tx, auth, id, { forUpdate: true });
    if (!campaign) throw notFound("campaign");
    if (campaign.status !== "running") return campaignView(campaign);
    await settleEndedCalls(tx, { ...campaign, status: "cancelled" }, deps.clock.now());
    await cancelPending(tx, id);
    const row = await refreshCampaign(tx, id, { cancel: true, now: deps.clock.now() });
    const view = campaignView(row);
    // Every call had already ended (the engine had not yet seen the last one): completed, not cancelled.
    await recordEvent(tx, deps, {
      organizationId: row.organization_id,
      agentId: row.agent_id,
      type: row.status === "completed" ? "campaign.completed" : "campaign.cancelled",
      livemode: row.livemode,
      data: view,
    });
    return view;
  });
}

export async function listCampaigns(
  deps: Pick<Deps, "sql">,
  auth: ReadScope,
  q: { limit: number; starting_after?: string | undefined; status?: string | undefined },
) {
  return paginate<CampaignRow, CampaignView>({ ...campaignsPage(deps.sql, auth, q), map: campaignView });
}
