import type { Sql } from "postgres";
import type { Deps } from "../../src/deps.ts";
import { createContact } from "../../src/services/contacts.ts";

/** A real contact of the organization, created through the contacts service. */
export async function insertContact(deps: Deps, organizationId: string): Promise<string> {
  const contact = await createContact(deps, { organizationId, livemode: false }, { phone: "+33612345678" });
  return contact.id;
}

/** Row counts of everything a call creation may write. */
export async function writeCounts(sql: Sql) {
  const [row] = (await sql`select
    (select count(*)::int from calls) as calls,
    (select count(*)::int from timers) as timers,
    (select count(*)::int from tasks) as tasks,
    (select count(*)::int from events) as events`) as unknown as [Record<string, number>];
  return row;
}
