import { assertAgentAllowed, type SecretKeyAuth } from "../auth/access.ts";
import { findAgent } from "../db/agents.ts";
import {
  type CampaignRow,
  type CampaignTarget,
  type CampaignView,
  campaignsScope,
  campaignView,
  cancelPending,
  countInProgress,
  findCampaign,
  insertCampaign,
  lockCampaign,
  markCalling,
  nextPending,
  refreshCampaign,
  settleEndedCalls,
} from "../db/campaigns.ts";
import { findContactTargets } from "../db/contacts.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import { paginate } from "../db/engine/pages.ts";
import { findOrganization } from "../db/organizations.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import type { FlatObject } from "../schemas.ts";
import type { BatchTimerHandler } from "../timers/types.ts";
import { recordEvent } from "./events.ts";
import { usedMinutes } from "./minutes.ts";
import { createSimulatedCall } from "./simulatedCalls.ts";

/**
 * Campaigns: an agent calls a list of contacts, at most `concurrency` calls at a time.
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
}

/** A test campaign calls at most 100 contacts. */
export const TEST_CAMPAIGN_MAX_CONTACTS = 100;

export { CAMPAIGN_STATUSES } from "../db/campaigns.ts";

/**
 * POST /v1/campaigns. Everything is checked before anything is written: the agent (404, 403), the
 * contact ids (404), then by mode. Test key: at most 100 contacts, an active agent, then a free
 * campaign with `livemode` false whose calls are simulated. Live key: paid plan (403 `plan_required`),
 * plan minutes left (403 `plan_minutes_exhausted`), then carrier (503); no carrier exists in this
 * service, so a live campaign is never created.
 */
export async function createCampaign(
  deps: Deps,
  auth: SecretKeyAuth,
  input: CreateCampaignInput,
): Promise<CampaignView> {
  const agent = isId(input.agentId, "agt")
    ? await findAgent(deps.sql, auth.organizationId, input.agentId)
    : null;
  if (!agent) throw new ApiError("not_found", "No such agent.", { param: "agentId" });
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
    if (!auth.paidPlan) {
      throw new ApiError("plan_required", "Live campaigns need an active paid plan for the organization.");
    }
    // A live campaign needs plan minutes too (none are reserved here: no call can start).
    const org = await findOrganization(deps.sql, auth.organizationId);
    const used = await usedMinutes(deps.sql, deps.clock, { organizationId: auth.organizationId });
    if ((org?.plan_minutes ?? 0) - used <= 0) {
      throw new ApiError(
        "plan_minutes_exhausted",
        "The organization's plan minutes for this month are used up.",
      );
    }
    throw new ApiError("carrier_unavailable", "No carrier is configured to place live phone calls.");
  }
  if (targets.length > TEST_CAMPAIGN_MAX_CONTACTS) {
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
        livemode: false,
        name: input.name,
        agent_id: agent.id,
        concurrency: input.concurrency,
        max_attempts: input.maxAttempts,
        created_at: now,
        started_at: now,
      },
      targets,
    );
    const row = await advance(tx, deps, id, agent.content_language);
    const view = campaignView(row!);
    await recordEvent(tx, deps, {
      organizationId: auth.organizationId,
      agentId: view.agentId,
      type: "campaign.started",
      livemode: false,
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
async function advance(tx: Db, deps: Deps, id: string, agentLanguage?: string): Promise<CampaignRow | null> {
  const campaign = await lockCampaign(tx, id);
  if (!campaign) return null;
  if (campaign.status === "completed") return campaign;
  await settleEndedCalls(tx, campaign);
  if (campaign.status === "running") {
    const free = campaign.concurrency - (await countInProgress(tx, id));
    const next = await nextPending(tx, id, free);
    const language =
      agentLanguage ??
      (next.length > 0
        ? (await findAgent(tx, campaign.organization_id, campaign.agent_id))?.content_language
        : undefined);
    const started: { position: number; callId: string }[] = [];
    for (const target of next) {
      // Only test campaigns exist (a live one is refused for want of a carrier): each call is simulated.
      const call = await createSimulatedCall(tx, deps, {
        organizationId: campaign.organization_id,
        agentId: campaign.agent_id,
        ...(language ? { agentLanguage: language } : {}),
        direction: "outbound",
        to: target.phone,
        contactId: target.contactId,
        campaignId: campaign.id,
        variables: target.variables,
      });
      started.push({ position: target.position, callId: call.id });
    }
    await markCalling(tx, id, started);
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
 * The `campaign.advance` timers due together: each campaign advances once per batch, one after the
 * other (they share the firing transaction).
 */
export function campaignSteps(deps: Deps): BatchTimerHandler {
  return async ({ tx, timers }) => {
    const ids = [...new Set(timers.map((t) => String(t.payload.campaignId)))];
    for (const id of ids) await advance(tx, deps, id);
  };
}

type ReadScope = Pick<SecretKeyAuth, "organizationId" | "livemode" | "agentIds">;

/** Malformed, unknown, foreign, other-mode: all the same 404. */
export async function getCampaign(
  deps: Pick<Deps, "sql">,
  auth: ReadScope,
  id: string,
): Promise<CampaignView> {
  const row = isId(id, "cmp") ? await findCampaign(deps.sql, auth, id) : null;
  if (!row) throw new ApiError("not_found", "No such campaign.");
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
  if (!isId(id, "cmp")) throw new ApiError("not_found", "No such campaign.");
  return pipelinedTransaction(deps.sql, async (transaction) => {
    const tx = transaction;
    const campaign = await findCampaign(tx, auth, id, { forUpdate: true });
    if (!campaign) throw new ApiError("not_found", "No such campaign.");
    if (campaign.status !== "running") return campaignView(campaign);
    await settleEndedCalls(tx, { ...campaign, status: "cancelled" });
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
  const { sql } = deps;
  return paginate<CampaignRow, CampaignView>({
    sql,
    table: "campaigns",
    where: campaignsScope(sql, auth, q),
    prefix: "cmp",
    limit: q.limit,
    startingAfter: q.starting_after,
    map: campaignView,
  });
}
