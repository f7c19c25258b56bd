import type { Db } from "./engine/connection.ts";

/**
 * The planner's statistics of the service's tables. They are kept fresh by the service itself, never
 * left to autovacuum: it may be off (PostgreSQL), and the embedded database has none.
 */

/** Tables smaller than this many pages are not worth analyzing again: any plan reads them fast. */
const MIN_PAGES = 10;

/**
 * The service's tables whose statistics lag behind: never analyzed though they hold data, grown by more
 * than a fifth (in pages) since they were, or (where the database counts them: PostgreSQL) more than a
 * tenth of their rows changed since. Pages are read from the files themselves, so growth is seen on the
 * embedded database too, where the statistics views count nothing.
 */
export async function tablesWithStaleStatistics(sql: Db): Promise<string[]> {
  const rows = await sql<{ name: string }[]>`
    select c.relname as name
    from pg_class c
      join pg_namespace n on n.oid = c.relnamespace
      left join pg_stat_user_tables s on s.relid = c.oid
    where n.nspname = current_schema() and c.relkind = 'r'
      and (pg_relation_size(c.oid) / current_setting('block_size')::int) >= ${MIN_PAGES}
      and (
        c.reltuples < 0
        or pg_relation_size(c.oid) / current_setting('block_size')::int > c.relpages * 1.2
        or coalesce(s.n_mod_since_analyze, 0) > 50 + 0.1 * greatest(c.reltuples, 0)
      )
    order by c.relname`;
  return rows.map((r) => r.name);
}

export async function analyzeTable(sql: Db, name: string): Promise<void> {
  await sql`analyze ${sql(name)}`;
}
