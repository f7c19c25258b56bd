import {
  findOrganization,
  insertOrganization,
  listOrganizations as listOrganizationRows,
  type OrganizationRow,
  updateOrganization as updateOrganizationRow,
} from "../db/organizations.ts";
import type { TxDeps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";

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

/** Every organization, newest first: a short list an operator reads. */
export async function listOrganizations(deps: TxDeps) {
  const rows = await listOrganizationRows(deps.sql);
  return { organizations: rows.map(organizationView) };
}
