import type { Sql } from "postgres";
import type { Logger } from "../../log.ts";
import { migrations as all } from "./migrations.ts";

/** An arbitrary constant: the advisory lock that serialises migrations across processes. */
const MIGRATION_LOCK = 72_410_001;

/**
 * Applies pending migrations in order, each in its own transaction, recorded in schema_migrations.
 * A session-level advisory lock on one reserved connection makes two processes starting at once safe:
 * the second waits, then finds nothing left to do.
 */
export async function migrate(sql: Sql, log?: Logger, migrations = all): Promise<string[]> {
  const conn = await sql.reserve();
  const applied: string[] = [];
  try {
    await conn`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await conn`
      create table if not exists schema_migrations (
        name text primary key,
        applied_at timestamptz not null default now()
      )`;
    const done = new Set(
      (await conn<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name),
    );
    for (const m of migrations) {
      if (done.has(m.name)) continue;
      await conn`begin`;
      try {
        await conn.unsafe(m.sql);
        if (m.run) await m.run(conn);
        await conn`insert into schema_migrations (name) values (${m.name})`;
        await conn`commit`;
      } catch (err) {
        await conn`rollback`;
        throw new Error(`migration ${m.name} failed: ${(err as Error).message}`);
      }
      applied.push(m.name);
      log?.info("migration applied", { migration: m.name });
    }
    // New tables and indexes start with statistics (a plan made before any would assume a size).
    if (applied.length) await conn`analyze`;
  } finally {
    await conn`select pg_advisory_unlock(${MIGRATION_LOCK})`.catch(() => {});
    conn.release();
  }
  return applied;
}
