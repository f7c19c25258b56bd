import type { Db } from "./engine/connection.ts";
import type { PageInput, PageRequest } from "./engine/pages.ts";

/** Statements of the organizations table. */

/**
 * When an organization's live phone calls may start, in its own time zone (services/callWindow.ts
 * reads it): "HH:MM" `start` and `end` (end before start crosses midnight; "24:00" is midnight),
 * an IANA `timeZone`, and the ISO weekdays (Monday = 1) on which the window opens.
 */
export interface CallWindow {
  start: string;
  end: string;
  timeZone: string;
  days: number[];
}

export interface OrganizationRow {
  id: string;
  name: string;
  paid_plan: boolean;
  plan_minutes: number;
  /** Outbound SIP trunk of live phone calls; null: LIVEKIT_SIP_TRUNK_ID. */
  sip_trunk_id: string | null;
  /** Caller number of live phone calls (E.164); null: LIVEKIT_SIP_FROM_NUMBER, else the trunk's own. */
  caller_number: string | null;
  /** Countries live phone calls may reach; null: every country. */
  allowed_countries: string[] | null;
  /** When live phone calls may start; null: any time. */
  call_window: CallWindow | null;
  max_concurrent_calls: number;
  max_calls_per_hour: number;
  created_at: Date;
}

/** The carrier settings: what an operator sets besides the name and the plan. */
export type CarrierSettings = Pick<
  OrganizationRow,
  | "sip_trunk_id"
  | "caller_number"
  | "allowed_countries"
  | "call_window"
  | "max_concurrent_calls"
  | "max_calls_per_hour"
>;

export async function insertOrganization(sql: Db, row: OrganizationRow): Promise<OrganizationRow> {
  const [inserted] = await sql<OrganizationRow[]>`
    insert into organizations (id, name, paid_plan, plan_minutes, sip_trunk_id, caller_number, allowed_countries,
      call_window, max_concurrent_calls, max_calls_per_hour, created_at)
    values (${row.id}, ${row.name}, ${row.paid_plan}, ${row.plan_minutes}, ${row.sip_trunk_id},
      ${row.caller_number}, ${row.allowed_countries}::text[],
      ${row.call_window ? sql.json(row.call_window as never) : null}::jsonb, ${row.max_concurrent_calls},
      ${row.max_calls_per_hour}, ${row.created_at})
    returning *`;
  return inserted!;
}

export type OrganizationPatchRow = Partial<Omit<OrganizationRow, "id" | "created_at">>;

/**
 * Changes the fields present in `patch` (a field set to null is cleared; one left out keeps its
 * value); null when there is no such organization.
 */
export async function updateOrganization(
  sql: Db,
  id: string,
  patch: OrganizationPatchRow,
): Promise<OrganizationRow | null> {
  const has = (k: keyof OrganizationPatchRow) => Object.hasOwn(patch, k) && patch[k] !== undefined;
  const window = patch.call_window;
  const [row] = await sql<OrganizationRow[]>`
    update organizations set
      name = ${has("name") ? sql`${patch.name!}` : sql`name`},
      paid_plan = ${has("paid_plan") ? sql`${patch.paid_plan!}::boolean` : sql`paid_plan`},
      plan_minutes = ${has("plan_minutes") ? sql`${patch.plan_minutes!}::integer` : sql`plan_minutes`},
      sip_trunk_id = ${has("sip_trunk_id") ? sql`${patch.sip_trunk_id ?? null}::text` : sql`sip_trunk_id`},
      caller_number = ${has("caller_number") ? sql`${patch.caller_number ?? null}::text` : sql`caller_number`},
      allowed_countries = ${
        has("allowed_countries") ? sql`${patch.allowed_countries ?? null}::text[]` : sql`allowed_countries`
      },
      call_window = ${
        has("call_window") ? sql`${window ? sql.json(window as never) : null}::jsonb` : sql`call_window`
      },
      max_concurrent_calls = ${
        has("max_concurrent_calls") ? sql`${patch.max_concurrent_calls!}::integer` : sql`max_concurrent_calls`
      },
      max_calls_per_hour = ${
        has("max_calls_per_hour") ? sql`${patch.max_calls_per_hour!}::integer` : sql`max_calls_per_hour`
      }
    where id = ${id} returning *`;
  return row ?? null;
}

/** The scope of the list of organizations: all of them (index organizations_created). */
/** The page of the list of every organization (db/engine/pages.ts), on organizations_created. */
export function organizationsPage(sql: Db, q: PageInput): PageRequest<OrganizationRow> {
  return {
    sql,
    table: "organizations",
    ranges: [{ keys: [] }],
    prefix: "org",
    limit: q.limit,
    startingAfter: q.starting_after,
  };
}

export async function findOrganization(sql: Db, id: string): Promise<OrganizationRow | null> {
  const [row] = await sql<OrganizationRow[]>`select * from organizations where id = ${id}`;
  return row ?? null;
}

/** True when the database holds no organization at all (a fresh install). */
export async function noOrganizationExists(sql: Db): Promise<boolean> {
  const rows = await sql`select 1 from organizations limit 1`;
  return rows.length === 0;
}
