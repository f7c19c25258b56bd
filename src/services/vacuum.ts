import type { Db } from "../db/engine/connection.ts";
import {
  autovacuumRuns,
  tablesToVacuum,
  type VacuumLimits,
  type VacuumTarget,
  vacuumTable,
} from "../db/vacuum.ts";
import type { Deps } from "../deps.ts";

/**
 * Vacuuming where the server does not: the embedded database has no autovacuum (a single-user
 * PostgreSQL runs no background process), and a PostgreSQL server may have it turned off. Without it,
 * tables that churn (timers, session tokens, rate-limit windows, events past their retention) keep
 * their dead rows and grow, and no row is ever frozen: the database's transaction-id age grows until
 * the server refuses every write, about 2.1 billion transactions on (25 days at 1,000 a second; the
 * warnings before that are notices, which the driver drops). So the statistics check
 * (services/housekeeping.ts) looks, every FULL_CHECK_EVERY_MS (~3 ms on the embedded database), for
 * - tables whose dead rows pass autovacuum's threshold (50 + 20 % of their rows): vacuumed;
 * - tables whose oldest unfrozen transaction id (or multixact id) is 100 million transactions old:
 *   vacuumed with `freeze`, far ahead of the refusal. Catalogs count, so the database's own age
 *   (its oldest table's) follows. (A PostgreSQL server freezes by itself at autovacuum_freeze_max_age,
 *   200 million by default, even with autovacuum off; this comes first.)
 * Where autovacuum runs (a PostgreSQL server's default) the service leaves it all to the server: it
 * knows the load, and two vacuums of one table would only wait on each other.
 *
 * A vacuum cannot run inside a transaction, the timer's included: it runs on the pool once the
 * timer's transaction has committed. On the embedded database it holds the one connection, and the
 * process's thread, while it runs, so a pass is bounded: the worst tables first, and no table is
 * begun once the pass has spent PASS_BUDGET_MS (the rest wait for the next pass). One
 * vacuum cannot be cut short. Measured on the embedded database (a loaded 2-core machine): 1,000,000
 * rows of which half dead (190 MB with three indexes) ~0.8 s; 100,000 rows of which half dead ~60 ms;
 * freezing 1,000,000 rows never vacuumed ~0.26 s; freezing each catalog of a new database ~3 ms (about
 * 70 of them fit in one pass); a table with nothing to do ~1 ms. PostgreSQL took about as long. All far
 * below the minute after which another container may take the data directory over. A vacuum longer
 * than SLOW_MS is logged as a warning: the embedded database stood still meanwhile.
 */

export const VACUUM_LIMITS: VacuumLimits = { deadRows: 50, deadShare: 0.2, freezeAge: 100_000_000 };
/** No vacuum is begun once a pass has taken this long. */
const PASS_BUDGET_MS = 250;
/** A vacuum that took longer is logged as a warning. */
const SLOW_MS = 1_000;

/** The tables to vacuum now, the worst first: none where the server's autovacuum runs. */
export async function vacuumDue(sql: Db, limits: VacuumLimits = VACUUM_LIMITS): Promise<VacuumTarget[]> {
  if (await autovacuumRuns(sql)) return [];
  return tablesToVacuum(sql, limits);
}

export interface VacuumOutcome {
  table: string;
  freeze: boolean;
  ms: number;
  /** Skipped: another session held a lock that conflicts with it. */
  skipped?: true;
  /** Why the vacuum failed. */
  error?: string;
}

/**
 * Vacuums `due` in its order, one table at a time, until the pass has taken PASS_BUDGET_MS (the first
 * always runs). Never throws: a failure is logged, and a table failed or skipped (locked elsewhere) is
 * still due at the next pass. Returns what it did, also logged (debug).
 */
export async function vacuumTables(
  deps: Pick<Deps, "sql" | "log">,
  due: readonly VacuumTarget[],
  budgetMs = PASS_BUDGET_MS,
): Promise<VacuumOutcome[]> {
  const begun = performance.now();
  const done: VacuumOutcome[] = [];
  for (const table of due) {
    if (done.length > 0 && performance.now() - begun >= budgetMs) break;
    const name = `${table.schema}.${table.name}`;
    const start = performance.now();
    try {
      const ran = await vacuumTable(deps.sql, table);
      const ms = Math.round(performance.now() - start);
      done.push({ table: name, freeze: table.freeze, ms, ...(ran ? {} : { skipped: true as const }) });
      if (ms >= SLOW_MS) {
        deps.log.warn("a vacuum took long (on the embedded database every statement waited for it)", {
          table: name,
          ms,
        });
      }
    } catch (err) {
      const error = (err as Error).message;
      done.push({ table: name, freeze: table.freeze, ms: Math.round(performance.now() - start), error });
      deps.log.warn("a vacuum failed; the next pass tries again", { table: name, error });
    }
  }
  deps.log.debug("vacuumed", { tables: done, left: due.length - done.length });
  return done;
}
