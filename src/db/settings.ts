import type { Db } from "./engine/connection.ts";

/** Statements of the settings table: named JSON values of the installation. */

export async function readSetting<T>(sql: Db, key: string): Promise<T | null> {
  const [row] = await sql<{ value: T }[]>`select value from settings where key = ${key}`;
  return row?.value ?? null;
}

export async function writeSetting(sql: Db, key: string, value: unknown): Promise<void> {
  await sql`
    insert into settings (key, value) values (${key}, ${sql.json(value as never)})
    on conflict (key) do update set value = excluded.value`;
}

/** Takes a transaction-scoped advisory lock (released at commit or rollback). */
export async function lockForTransaction(tx: Db, lock: number): Promise<void> {
  await tx`select pg_advisory_xact_lock(${lock})`;
}
