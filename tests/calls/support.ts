import type { Sql } from "postgres";
import { newId } from "../../src/ids.ts";

/**
 * The contacts table belongs to the contacts migration; when a test database lacks it, a minimal
 * stand-in is created so `contactId` checks can be exercised here.
 */
export async function insertContact(sql: Sql, organizationId: string): Promise<string> {
  const [{ exists }] = (await sql`select to_regclass('contacts') is not null as exists`) as unknown as [
    { exists: boolean },
  ];
  if (!exists) {
    await sql`create table contacts (id text primary key, organization_id text not null, phone text not null,
      created_at timestamptz not null default now())`;
  }
  const id = newId("ct");
  await sql`insert into contacts (id, organization_id, phone, created_at) values (${id}, ${organizationId}, '+33612345678', now())`;
  return id;
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

export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 15_000, stepMs = 20) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await Bun.sleep(stepMs);
  }
  throw new Error(`condition not met within ${timeoutMs} ms`);
}
