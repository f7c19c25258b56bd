import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";

/** Statements of the organizations table. */

export interface OrganizationRow {
  id: string;
  name: string;
  paid_plan: boolean;
  plan_minutes: number;
  created_at: Date;
}

export async function insertOrganization(sql: Db, row: OrganizationRow): Promise<OrganizationRow> {
  const [inserted] = await sql<OrganizationRow[]>`
    insert into organizations (id, name, paid_plan, plan_minutes, created_at)
    values (${row.id}, ${row.name}, ${row.paid_plan}, ${row.plan_minutes}, ${row.created_at})
    returning *`;
  return inserted!;
}

/** Changes the fields given (the others keep their value); null when there is no such organization. */
export async function updateOrganization(
  sql: Db,
  id: string,
  patch: { name?: string | undefined; paid_plan?: boolean | undefined; plan_minutes?: number | undefined },
): Promise<OrganizationRow | null> {
  const [row] = await sql<OrganizationRow[]>`
    update organizations set
      name = coalesce(${patch.name ?? null}, name),
      paid_plan = coalesce(${patch.paid_plan ?? null}::boolean, paid_plan),
      plan_minutes = coalesce(${patch.plan_minutes ?? null}::integer, plan_minutes)
    where id = ${id} returning *`;
  return row ?? null;
}

/** The scope of the list of organizations: all of them (index organizations_created). */
export const allOrganizations = (sql: Db): Fragment => sql`true`;

export async function findOrganization(sql: Db, id: string): Promise<OrganizationRow | null> {
  const [row] = await sql<OrganizationRow[]>`select * from organizations where id = ${id}`;
  return row ?? null;
}

/** True when the database holds no organization at all (a fresh install). */
export async function noOrganizationExists(sql: Db): Promise<boolean> {
  const rows = await sql`select 1 from organizations limit 1`;
  return rows.length === 0;
}
