import type { Db } from "./engine/connection.ts";

/**
 * The planner's statistics of the service's tables. They are kept fresh by the service itself, never
 * left to autovacuum: it may be off (PostgreSQL), and the embedded database has none.
 */

/** Tables smaller than this many pages are not worth analyzing again: any plan reads them fast. */
const MIN_PAGES = 10;

/**
 * The service's tables whose statistics lag behind: never analyzed though they hold data, analyzed when
 * they had fewer than MIN_PAGES pages, grown by more than a fifth (in pages) since they were, or with
 * more than a tenth of their rows inserted, updated or deleted since (`n_mod_since_analyze`, read from
 * its function: the view computes some twenty more per table, a third of the check on the embedded
 * database).
 *
 * Both databases keep that count (the embedded one is PostgreSQL too, statistics views included), but
 * it arrives late: each session adds its changes to the shared count at most once a second, when idle
 * (the embedded database's one session, at its first statement a second or more after its last
 * report). Changes made just before an analyze may so be counted after it: the table is then found
 * stale at the next check and analyzed once more, which costs one analyze. Pages are read from the
 * files themselves and are never late: growth is seen at once.
 *
 * `full: false` looks only for the tables that now have MIN_PAGES pages or more and had fewer at their
 * last analysis (or never had one): what a plan a connection kept from a small table needs, checked
 * often (services/housekeeping.ts). It finds each table once, when it crosses that size: from there
 * a key's index is the cheaper read in every plan, however much the table grows. The rest (growth by
 * a fifth, changes in place) is for the full check, less often: a large table that many calls update
 * or fill crosses its tenth or its fifth every few seconds, and each analyze of it holds the embedded
 * database's one session.
 */
export async function tablesWithStaleStatistics(sql: Db, opts: { full?: boolean } = {}): Promise<string[]> {
  const full = opts.full ?? true;
  const rows = await sql<{ name: string }[]>`
    select c.relname as name
    from pg_class c
      join pg_namespace n on n.oid = c.relnamespace
      cross join lateral (select pg_relation_size(c.oid) / current_setting('block_size')::int as pages) p
    where n.nspname = current_schema() and c.relkind = 'r' and p.pages >= ${MIN_PAGES}
      and (
        c.reltuples < 0
        or c.relpages < ${MIN_PAGES}
        or (${full}::boolean and (
          p.pages > c.relpages * 1.2
          or pg_stat_get_mod_since_analyze(c.oid) > 50 + 0.1 * greatest(c.reltuples, 0)))
      )
    order by c.relname`;
  return rows.map((r) => r.name);
}

export async function analyzeTable(sql: Db, name: string): Promise<void> {
  await sql`analyze ${sql(name)}`;
}
