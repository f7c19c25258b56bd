import { waitingLiveCampaigns } from "../db/campaigns.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import { type Page, type PageInput, paginate } from "../db/engine/pages.ts";
import { usageOf } from "../db/minutes.ts";
import {
  type CallWindow,
  findOrganization,
  insertOrganization,
  type OrganizationPatchRow,
  type OrganizationRow,
  organizationsPage,
  updateOrganization as updateOrganizationRow,
} from "../db/organizations.ts";
import type { Deps, TxDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import { monthOf } from "./minutes.ts";

/** Organizations: what operators create and change (admin API and CLI). */

export const organizationView = (r: OrganizationRow) => ({
  id: r.id,
  name: r.name,
  paidPlan: r.paid_plan,
  planMinutes: r.plan_minutes,
  sipTrunkId: r.sip_trunk_id,
  callerNumber: r.caller_number,
  allowedCountries: r.allowed_countries,
  callWindow: r.call_window,
  maxConcurrentCalls: r.max_concurrent_calls,
  maxCallsPerHour: r.max_calls_per_hour,
  createdAt: r.created_at.toISOString(),
});

/** 404 unless the organization exists. */
export async function assertOrganization(deps: TxDeps, id: string): Promise<void> {
  if (!isId(id, "org") || !(await findOrganization(deps.sql, id))) throw notFound("organization");
}

/** An organization's fields as operators send them (validated by admin/schema/organizations.ts). */
export interface OrganizationFields {
  name: string;
  paidPlan: boolean;
  planMinutes: number;
  sipTrunkId: string | null;
  callerNumber: string | null;
  allowedCountries: string[] | null;
  callWindow: CallWindow | null;
  maxConcurrentCalls: number;
  maxCallsPerHour: number;
}

/** Defaults of what a new organization is not given: no plan, no carrier settings of its own, no rule. */
const NEW_ORGANIZATION: Omit<OrganizationFields, "name"> = {
  paidPlan: false,
  planMinutes: 0,
  sipTrunkId: null,
  callerNumber: null,
  allowedCountries: null,
  callWindow: null,
  maxConcurrentCalls: 10,
  maxCallsPerHour: 100,
};

type Given<T> = { [K in keyof T]?: T[K] | undefined };

/** The fields given (undefined ones left out, so they keep their value; null is a value: it clears). */
function given<T extends object>(input: Given<T>): Partial<T> {
  return Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function rowFields(v: Partial<OrganizationFields>): OrganizationPatchRow {
  const row: OrganizationPatchRow = {
    name: v.name,
    paid_plan: v.paidPlan,
    plan_minutes: v.planMinutes,
    sip_trunk_id: v.sipTrunkId,
    caller_number: v.callerNumber,
    allowed_countries: v.allowedCountries,
    call_window: v.callWindow,
    max_concurrent_calls: v.maxConcurrentCalls,
    max_calls_per_hour: v.maxCallsPerHour,
  };
  return given(row);
}

export async function createOrganization(deps: TxDeps, input: Given<OrganizationFields> & { name: string }) {
  const v: OrganizationFields = {
    ...NEW_ORGANIZATION,
    ...given<OrganizationFields>(input),
    name: input.name,
  };
  const row = await insertOrganization(deps.sql, {
    id: deps.ids.next("org"),
    ...(rowFields(v) as Omit<OrganizationRow, "id" | "created_at">),
    created_at: deps.clock.now(),
  });
  return organizationView(row);
}

/** Changes the fields given. Cached keys of the organization are evicted (their paid plan changed). */
export async function updateOrganization(deps: Deps, id: string, input: Given<OrganizationFields>) {
  if (!isId(id, "org")) throw notFound("organization");
  const row = await pipelinedTransaction(deps.sql, async (tx) => {
    const updated = await updateOrganizationRow(tx, id, rowFields(given<OrganizationFields>(input)));
    // Its live campaigns waiting on its rules (a window's opening, room in the hour or among its calls)
    // look again now: a wider window or a higher limit lets them call at once rather than at the
    // time the old rules gave. One the new rules still refuse goes back to waiting.
    if (updated) {
      const now = deps.clock.now();
      const waiting = await waitingLiveCampaigns(tx, id, now);
      for (const campaignId of waiting) {
        await deps.timers.schedule(tx, {
          kind: TIMER_KINDS.campaignAdvance,
          delayMs: 0,
          payload: { campaignId },
        });
      }
    }
    return updated;
  });
  if (!row) throw notFound("organization");
  deps.keyCache.evictChange({ organizationId: id });
  return organizationView(row);
}

export type OrganizationView = ReturnType<typeof organizationView>;

/** Every organization, newest first, in the cursor convention. */
export function listOrganizations(deps: TxDeps, q: PageInput): Promise<Page<OrganizationView>> {
  return paginate<OrganizationRow, OrganizationView>({
    ...organizationsPage(deps.sql, q),
    map: organizationView,
  });
}

/** One organization with its plan minutes used this month (UTC), running calls' reservations included. */
export async function getOrganization(deps: TxDeps, id: string) {
  const row = isId(id, "org") ? await findOrganization(deps.sql, id) : null;
  if (!row) throw notFound("organization");
  const month = monthOf(deps.clock.now());
  const used = await usageOf(deps.sql, "plan", id, month);
  return { ...organizationView(row), usage: { month: month.slice(0, 7), planMinutesUsed: used } };
}
