import type { Sql } from "postgres";
import type { Db } from "./engine/connection.ts";

/**
 * Vacuuming, where the server's autovacuum does not run: the embedded database (a single-user
 * PostgreSQL, which has no background processes at all, though its `autovacuum` setting reads `on`)
 * and a PostgreSQL server with autovacuum turned off. The rules (thresholds, how much per pass) are
 * the service's (services/vacuum.ts).
 */

/**
 * Whether the server vacuums by itself: autovacuum on, with the counts it decides from (track_counts),
 * in a server rather than a single-user backend.
 */
export async function autovacuumRuns(sql: Db): Promise<boolean> {
  const [row] = await sql<{ runs: boolean }[]>`
    select current_setting('autovacuum')::bool and current_setting('track_counts')::bool
      and (select backend_type from pg_stat_activity where pid = pg_backend_pid())
        is distinct from 'standalone backend' as runs`;
  return row!.runs;
}

export interface VacuumLimits {
  /** A table is vacuumed once its dead rows pass `deadRows + deadShare × its rows` (autovacuum's formula). */
  deadRows: number;
  deadShare: number;
  /** A table is frozen once its oldest unfrozen transaction (or multixact) id is this old. */
  freezeAge: number;
}

export interface VacuumTarget {
  schema: string;
  name: string;
  /** Past the freeze age: vacuumed with `freeze`. */
  freeze: boolean;
  /** The table's oid, and how many vacuums it had when it was found due (to tell one skipped). */
  oid: string;
  vacuums: number;
}

/**
 * Every table of the database this session may vacuum that needs it, the worst first: those past the
 * freeze age, oldest first, then those whose dead rows pass their threshold by the most. Catalogs are
 * included: analyzing leaves dead rows in pg_statistic, and every table holds the database's own
 * frozen-xid age back (`age(datfrozenxid)` is its oldest table's). A table's TOAST table is vacuumed
 * with it, so its age counts as the table's. Reads catalogs and statistics only: no lock on any table.
 *
 * Only tables this role may vacuum: a superuser any, an owner its own, the database's owner all but
 * the catalogs shared between databases. Any other would be skipped by VACUUM with a warning, and stay
 * first in this list pass after pass. (A privilege granted otherwise, MAINTAIN, is not looked for.)
 */
export async function tablesToVacuum(sql: Db, limits: VacuumLimits): Promise<VacuumTarget[]> {
  return sql<VacuumTarget[]>`
    with tables as (
      select n.nspname as schema, c.relname as name, c.oid::text as oid,
        pg_stat_get_vacuum_count(c.oid)::int as vacuums,
        greatest(age(c.relfrozenxid), age(t.relfrozenxid), mxid_age(c.relminmxid), mxid_age(t.relminmxid))
          as unfrozen_age,
        pg_stat_get_dead_tuples(c.oid) - ${limits.deadRows} - ${limits.deadShare} * greatest(c.reltuples, 0)
          as dead_excess
      from pg_class c
        join pg_namespace n on n.oid = c.relnamespace
        left join pg_class t on t.oid = c.reltoastrelid
      where c.relkind in ('r', 'm')
        and c.relpersistence <> 't'
        and (
          (select rolsuper from pg_roles where rolname = current_user)
          or pg_has_role(c.relowner, 'USAGE')
          or (not c.relisshared and pg_has_role(
            (select datdba from pg_database where datname = current_database()), 'USAGE'))
        )
    ), due as (
      select schema, name, oid, vacuums, unfrozen_age >= ${limits.freezeAge} as "freeze", unfrozen_age,
        dead_excess
      from tables
      where unfrozen_age >= ${limits.freezeAge} or dead_excess > 0
    )
    select schema, name, "freeze", oid, vacuums from due
    order by "freeze" desc, case when "freeze" then unfrozen_age end desc, dead_excess desc`;
}

/**
 * Vacuums one table (freezing every row with `freeze`), outside any transaction: on the pool, never
 * a transaction's connection. A table another session holds a conflicting lock on (another vacuum, an
 * analyze, DDL) is skipped rather than waited for: returns whether the vacuum ran.
 */
export async function vacuumTable(sql: Sql, table: VacuumTarget): Promise<boolean> {
  const name = sql`${sql(table.schema)}.${sql(table.name)}`;
  if (table.freeze) await sql`vacuum (freeze, skip_locked) ${name}`;
  else await sql`vacuum (skip_locked) ${name}`;
  const [row] = await sql<{ ran: boolean }[]>`
    select pg_stat_get_vacuum_count(${table.oid}::oid) > ${table.vacuums} as ran`;
  return row!.ran;
}
