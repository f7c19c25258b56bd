import { canonicalNumber } from "../phoneNumbers.ts";
import type { Db } from "./engine/connection.ts";

/**
 * The step of migration 0037: the numbers stored before numbers had one spelling are rewritten in it,
 * so that a do-not-call entry meets its calls and a phone filter finds its rows however they were
 * written. Do-not-call entries that become the same number in one organization and mode are merged
 * (the one already in that spelling kept, else the oldest); contacts and the organizations' caller
 * numbers are rewritten in place. Scheduled calls and campaign contacts keep the number as written: it
 * is compared in its one spelling when they are placed (db/callAdmission.ts). Runs in the migration's
 * transaction.
 */
export async function respellStoredNumbers(sql: Db): Promise<void> {
  const entries = await sql<{ id: string; organization_id: string; livemode: boolean; phone: string }[]>`
    select id, organization_id, livemode, phone from blocked_numbers order by created_at, id`;
  const listed = (e: { organization_id: string; livemode: boolean }, phone: string) =>
    `${e.organization_id} ${e.livemode} ${phone}`;
  const taken = new Set(entries.map((e) => listed(e, e.phone)));
  for (const e of entries) {
    const phone = canonicalNumber(e.phone);
    if (phone === e.phone) continue;
    taken.delete(listed(e, e.phone));
    if (taken.has(listed(e, phone))) {
      await sql`delete from blocked_numbers where id = ${e.id}`;
    } else {
      await sql`update blocked_numbers set phone = ${phone} where id = ${e.id}`;
      taken.add(listed(e, phone));
    }
  }
  for (const [table, column] of [
    ["contacts", "phone"],
    ["organizations", "caller_number"],
  ] as const) {
    const rows = await sql<{ id: string; number: string }[]>`
      select id, ${sql(column)} as number from ${sql(table)} where ${sql(column)} is not null`;
    for (const r of rows) {
      const number = canonicalNumber(r.number);
      if (number !== r.number)
        await sql`update ${sql(table)} set ${sql(column)} = ${number} where id = ${r.id}`;
    }
  }
}
