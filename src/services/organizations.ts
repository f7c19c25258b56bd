import { type Page, type PageInput, paginate } from "../db/engine/pages.ts";
import { usageOf } from "../db/minutes.ts";
import {
  allOrganizations,
  findOrganization,
  insertOrganization,
  type OrganizationRow,
  updateOrganization as updateOrganizationRow,
} from "../db/organizations.ts";
import type { TxDeps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import { monthOf } from "./minutes.ts";

/** Organizations: what operators create and change (admin API and CLI). */

export const organizationView = (r: OrganizationRow) => ({
  id: r.id,
  name: r.name,
  paidPlan: r.paid_plan,
  planMinutes: r.plan_minutes,
  createdAt: r.created_at.toISOString(),
});

export function notFound(what: string, param?: string): ApiError {
  return new ApiError("not_found", `No such ${what}.`, param ? { param } : {});
}

/** 404 unless the organization exists. */
export async function assertOrganization(deps: TxDeps, id: string): Promise<void> {
  if (!isId(id, "org") || !(await findOrganization(deps.sql, id))) throw notFound("organization");
}

export async function createOrganization(
  deps: TxDeps,
  input: { name: string; paidPlan?: boolean | undefined; planMinutes?: number | undefined },
) {
  const row = await insertOrganization(deps.sql, {
    id: deps.ids.next("org"),
    name: input.name,
    paid_plan: input.paidPlan ?? false,
    plan_minutes: input.planMinutes ?? 0,
    created_at: deps.clock.now(),
  });
  return organizationView(row);
}

/** Changes the fields given. Cached keys of the organization are evicted (their paid plan changed). */
export async function updateOrganization(
  deps: TxDeps,
  id: string,
  input: { name?: string | undefined; paidPlan?: boolean | undefined; planMinutes?: number | undefined },
) {
  if (!isId(id, "org")) throw notFound("organization");
  const row = await updateOrganizationRow(deps.sql, id, {
    name: input.name,
    paid_plan: input.paidPlan,
    plan_minutes: input.planMinutes,
  });
  if (!row) throw notFound("organization");
  deps.keyCache.evict({ organizationId: id });
  return organizationView(row);
}

export type OrganizationView = ReturnType<typeof organizationView>;

/** Every organization, newest first, in the cursor convention. */
export function listOrganizations(deps: TxDeps, q: PageInput): Promise<Page<OrganizationView>> {
  return paginate<OrganizationRow, OrganizationView>({
    sql: deps.sql,
    table: "organizations",
    where: allOrganizations(deps.sql),
    prefix: "org",
    limit: q.limit,
    startingAfter: q.starting_after,
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
