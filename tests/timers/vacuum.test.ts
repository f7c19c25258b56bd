import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ensureSingleTimer } from "../../src/db/timers.ts";
import { autovacuumRuns, type VacuumLimits } from "../../src/db/vacuum.ts";
import {
  FULL_CHECK_EVERY_MS,
  refreshStatistics,
  STATISTICS_EVERY_MS,
} from "../../src/services/housekeeping.ts";
import { VACUUM_LIMITS, type VacuumOutcome, vacuumDue, vacuumTables } from "../../src/services/vacuum.ts";
import { TIMER_KINDS } from "../../src/timers/kinds.ts";
import { createTestContext, type TestContext } from "../helpers/app.ts";
import { TEST_DATABASE } from "../helpers/db.ts";
import { waitUntil } from "../helpers/wait.ts";
import { testRunner } from "./support.ts";

/**
 * Vacuuming where the server does not (the embedded database; PostgreSQL with autovacuum off, as the
 * test server runs): after the statistics check, the tables with many dead rows, and those whose
 * oldest unfrozen transaction id passed the freeze age, the worst first, a bounded pass at a time.
 */
let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
  await ensureSingleTimer(ctx.db.sql, TIMER_KINDS.statistics, STATISTICS_EVERY_MS);
});
afterAll(() => ctx.close());

/** What each vacuum pass so far did, as it logged it. */
const vacuumPasses = (): VacuumOutcome[][] =>
  ctx.logs
    .map((line) => JSON.parse(line))
    .filter((line) => line.msg === "vacuumed")
    .map((line) => line.tables);

/**
 * Runs the statistics check once, made due now, on a runner of its own with `limits`; waits for it to
 * schedule the next check, then (unless `vacuums` is false) for its vacuums to be logged. Returns what
 * those did. The check looks for vacuums in a full check, at most every FULL_CHECK_EVERY_MS: unless `lookedAgo` says when
 * it last did, the timer is made to forget it, so that this one looks.
 */
async function statisticsPass(
  limits: VacuumLimits = VACUUM_LIMITS,
  vacuums = true,
  lookedAgo?: number,
): Promise<VacuumOutcome[]> {
  const sql = ctx.db.sql;
  const logged = vacuumPasses().length;
  const payload = lookedAgo === undefined ? {} : { fullCheckAt: ctx.deps.clock.now().getTime() - lookedAgo };
  await sql`
    update timers set due_at = now(), payload = ${sql.json(payload)}
    where kind = 'statistics' and status = 'pending'`;
  const runner = testRunner(ctx.db);
  runner.register(TIMER_KINDS.statistics, refreshStatistics({ ...ctx.deps, timers: runner }, limits));
  await runner.start();
  try {
    await waitUntil("the statistics check to schedule the next one", async () => {
      const [row] = await sql<{ later: boolean }[]>`
        select due_at > now() + ${STATISTICS_EVERY_MS / 2}::float8 * interval '1 millisecond' as later
        from timers where kind = 'statistics' and status = 'pending'`;
      return row?.later;
    });
    if (vacuums) await waitUntil("the pass's vacuums", () => vacuumPasses().length > logged);
  } finally {
    await runner.stop();
  }
  return vacuumPasses().slice(logged).flat();
}

/**
 * A table of `rows` rows of which `deleted` are deleted, spread over all its pages. Without `payload`
 * (bytes per row) a table of 1,000 rows has fewer pages than the statistics check analyzes.
 */
async function tableWithDeadRows(name: string, rows: number, deleted: number, payload = 0) {
  const sql = ctx.db.sql;
  await sql`create table ${sql(name)} (id int primary key, payload text not null)`;
  await sql`insert into ${sql(name)} select i, repeat('x', ${payload}::int) from generate_series(1, ${rows}::int) i`;
  const every = rows / (rows - deleted);
  await sql`delete from ${sql(name)} where id % ${every}::int <> 0`;
  await waitUntil(`the deletes from ${name} to reach the statistics views`, async () => {
    const [row] = await sql<{ n: number }[]>`
      select n_dead_tup::int as n from pg_stat_user_tables where relname = ${name}`;
    return row!.n >= deleted;
  });
}

async function tableState(name: string) {
  const [row] = await ctx.db.sql<{ dead: number; vacuums: number; pages: number }[]>`
    select n_dead_tup::int as dead, vacuum_count::int as vacuums,
      (pg_relation_size(relid) / current_setting('block_size')::int)::int as pages
    from pg_stat_user_tables where relname = ${name}`;
  return row!;
}

const named = (outcomes: VacuumOutcome[], table: string) =>
  outcomes.find((o) => o.table === `public.${table}`);

describe("vacuuming", () => {
  test("the server's autovacuum is seen where it runs; the embedded database has none, though its setting reads on", async () => {
    const sql = ctx.db.sql;
    const [row] = await sql<{ setting: string }[]>`select current_setting('autovacuum') as setting`;
    const setting = row!.setting;
    if (ctx.db.kind === "embedded") {
      expect(setting).toBe("on");
      expect(await autovacuumRuns(sql)).toBe(false);
    } else {
      expect(await autovacuumRuns(sql)).toBe(setting === "on");
    }
  });

  test("a table with many deleted rows is vacuumed after the statistics check, and its space is used again", async () => {
    const sql = ctx.db.sql;
    // 15,000 of 20,000 rows go, three of every four on every page.
    await tableWithDeadRows("churn", 20_000, 15_000, 100);
    expect((await vacuumDue(sql)).map((t) => t.name)).toContain("churn");
    const before = await tableState("churn");

    const vacuumed = await statisticsPass();
    expect(named(vacuumed, "churn")).toEqual({
      table: "public.churn",
      freeze: false,
      ms: expect.any(Number),
    });
    const after = await tableState("churn");
    expect(after).toMatchObject({ dead: 0, vacuums: 1, pages: before.pages });
    // New rows fill the space the dead ones left: the table does not grow.
    await sql`insert into churn select i, repeat('y', 100) from generate_series(20001, 30000) i`;
    expect((await tableState("churn")).pages).toBe(before.pages);
  });

  test.skipIf(TEST_DATABASE === "embedded")(
    "a table another session holds locked is skipped rather than waited for; the check schedules the next one all the same, and a later pass vacuums it",
    async () => {
      const sql = ctx.db.sql;
      // 900 of 1,000 rows: a table too small for the statistics check to analyze it.
      await tableWithDeadRows("held", 1_000, 900);
      const holder = await sql.reserve();
      try {
        await holder`begin`;
        // The lock a vacuum takes: another session's vacuum, analyze or index build holds it.
        await holder`lock table held in share update exclusive mode`;
        expect(named(await statisticsPass(), "held")).toMatchObject({ freeze: false, skipped: true });
        expect(await tableState("held")).toMatchObject({ vacuums: 0, dead: 900 });
      } finally {
        await holder`rollback`;
        holder.release();
      }
      expect(named(await statisticsPass(), "held")).toEqual({
        table: "public.held",
        freeze: false,
        ms: expect.any(Number),
      });
      expect(await tableState("held")).toMatchObject({ vacuums: 1, dead: 0 });
    },
  );

  test("a vacuum that fails (its table dropped since the check) is logged, and the pass goes on with the next table", async () => {
    const sql = ctx.db.sql;
    await tableWithDeadRows("dropped", 1_000, 900);
    await tableWithDeadRows("survivor", 1_000, 900);
    const due = (await vacuumDue(sql)).filter((t) => t.name === "dropped" || t.name === "survivor");
    expect(due.map((t) => t.name).sort()).toEqual(["dropped", "survivor"]);
    await sql`drop table dropped`;

    const outcomes = await vacuumTables(ctx.deps, due);
    expect(named(outcomes, "dropped")).toMatchObject({ error: expect.stringContaining("does not exist") });
    expect(named(outcomes, "survivor")).toEqual({
      table: "public.survivor",
      freeze: false,
      ms: expect.any(Number),
    });
    expect(await tableState("survivor")).toMatchObject({ vacuums: 1, dead: 0 });
    const warned = ctx.logs.map((l) => JSON.parse(l)).filter((l) => l.msg.startsWith("a vacuum failed"));
    expect(warned).toEqual([expect.objectContaining({ level: "warn", table: "public.dropped" })]);
  });

  test("a pass begins no vacuum once it has spent its time: the worst table goes first, the others wait for the next pass", async () => {
    const sql = ctx.db.sql;
    await tableWithDeadRows("worse", 2_000, 1_800);
    await tableWithDeadRows("bad", 1_000, 900);
    const due = (await vacuumDue(sql)).filter((t) => t.name === "worse" || t.name === "bad");
    expect(due.map((t) => t.name)).toEqual(["worse", "bad"]);

    const outcomes = await vacuumTables(ctx.deps, due, 0);
    expect(outcomes.map((o) => o.table)).toEqual(["public.worse"]);
    expect(ctx.logs.map((l) => JSON.parse(l)).findLast((l) => l.msg === "vacuumed")).toMatchObject({
      left: 1,
    });
    expect((await vacuumDue(sql)).map((t) => t.name)).toContain("bad");
    await vacuumTables(ctx.deps, due.slice(1));
  });

  test("tables past the freeze age are frozen, the oldest first, and with them the database's own age", async () => {
    const sql = ctx.db.sql;
    await sql`create table old_rows (id int primary key)`;
    await sql`insert into old_rows select generate_series(1, 1000)`;
    // Transactions go by, each with an id of its own: 5,000 take a fraction of a second.
    await sql`do $$ begin for i in 1..5000 loop perform txid_current(); commit; end loop; end $$`;
    // A transaction id taken now: every row of old_rows is older.
    const [taken] = await sql<{ marker: string }[]>`select txid_current()::text as marker`;
    const marker = taken!.marker;
    const ages = async () => {
      const [row] = await sql<{ table: number; database: number; marker: number }[]>`
        select age(relfrozenxid) as table,
          (select age(datfrozenxid) from pg_database where datname = current_database()) as database,
          age((${marker}::bigint % 4294967296)::text::xid) as marker
        from pg_class where oid = 'old_rows'::regclass`;
      return row!;
    };
    const before = await ages();
    expect(before.table).toBeGreaterThanOrEqual(5000);
    const limits = { ...VACUUM_LIMITS, freezeAge: 4000 };
    expect((await vacuumDue(sql, limits)).find((t) => t.name === "old_rows")).toMatchObject({ freeze: true });

    // Every table of the database is past that age, catalogs included; the youngest, created last,
    // comes once every older one is frozen.
    const frozen: VacuumOutcome[] = [];
    for (let pass = 0; pass < 10 && !named(frozen, "old_rows"); pass++) {
      frozen.push(...(await statisticsPass(limits)));
    }
    expect(named(frozen, "old_rows")).toEqual({
      table: "public.old_rows",
      freeze: true,
      ms: expect.any(Number),
    });
    expect(frozen.filter((o) => o.error)).toEqual([]);
    // (On PostgreSQL another database's session may hold a catalog shared by all: skipped, not waited for.)
    expect(frozen.filter((o) => o.skipped && o.table.startsWith("public."))).toEqual([]);
    expect(frozen.map((o) => o.table)).toContain("pg_catalog.pg_class");
    // Frozen, not just vacuumed: the table's oldest unfrozen id is now younger than any of its rows.
    const after = await ages();
    expect(after.table).toBeLessThanOrEqual(after.marker);
    expect(after.database).toBeLessThan(before.database);
    // The only session of the embedded database: nothing else holds the oldest id back, nor consumes ids.
    if (ctx.db.kind === "embedded") expect(after.database).toBeLessThan(limits.freezeAge);
  });

  test("a table whose dead rows stay under 50 + 20 % of its rows is left alone: with nothing due, a pass vacuums nothing", async () => {
    const sql = ctx.db.sql;
    await sql`create table calm (id int primary key)`;
    await sql`insert into calm select generate_series(1, 1000)`;
    await sql`analyze calm`;
    await sql`delete from calm where id % 5 = 0`;
    await waitUntil("the deletes from calm to reach the statistics views", async () => {
      const [row] = await sql<{ n: number }[]>`
        select n_dead_tup::int as n from pg_stat_user_tables where relname = 'calm'`;
      return row!.n >= 200;
    });
    expect((await vacuumDue(sql)).map((t) => t.name)).not.toContain("calm");
    const embedded = ctx.db.kind === "embedded";
    if (embedded) {
      // One session, whose counts are all reported now: once the rest is vacuumed, nothing is due. (A
      // PostgreSQL server's shared catalogs count the changes of every database, other tests' too.)
      await sql`select pg_stat_force_next_flush()`;
      await sql`select 1`;
      await vacuumTables(ctx.deps, await vacuumDue(sql), Number.POSITIVE_INFINITY);
      expect(await vacuumDue(sql)).toEqual([]);
    }
    const vacuums = async () =>
      (await sql<{ n: number }[]>`select sum(vacuum_count)::int as n from pg_stat_all_tables`)[0]!.n;
    const before = await vacuums();
    const logged = vacuumPasses().length;

    await statisticsPass(VACUUM_LIMITS, false);
    // (On the embedded database's one connection, a vacuum begun after the check runs before this.)
    expect(await tableState("calm")).toMatchObject({ vacuums: 0, dead: 200 });
    expect(
      vacuumPasses()
        .slice(logged)
        .flat()
        .map((o) => o.table),
    ).not.toContain("public.calm");
    if (embedded) {
      expect(await vacuums()).toBe(before);
      expect(vacuumPasses()).toHaveLength(logged);
    }
  });

  test(`the check looks for tables to vacuum at most every FULL_CHECK_EVERY_MS, however often it runs`, async () => {
    const sql = ctx.db.sql;
    await tableWithDeadRows("churned", 1000, 500);
    const lookedAt = async () =>
      (
        await sql<{ at: number | null }[]>`
          select (payload ->> 'fullCheckAt')::float8 as at from timers
          where kind = 'statistics' and status = 'pending'`
      )[0]!.at;

    // Looked a moment ago: this pass leaves the table as it is, and keeps that moment.
    const recently = ctx.deps.clock.now().getTime() - 1_000;
    expect(await statisticsPass(VACUUM_LIMITS, false, 1_000)).toEqual([]);
    expect(await tableState("churned")).toMatchObject({ vacuums: 0 });
    expect(Math.abs((await lookedAt())! - recently)).toBeLessThan(1_000);

    // Looked FULL_CHECK_EVERY_MS ago: this pass looks, vacuums it, and notes when.
    const before = Date.now();
    const vacuumed = await statisticsPass(VACUUM_LIMITS, true, FULL_CHECK_EVERY_MS);
    expect(vacuumed.map((o) => o.table)).toContain("public.churned");
    expect(await tableState("churned")).toMatchObject({ vacuums: 1 });
    expect((await lookedAt())!).toBeGreaterThanOrEqual(before);
  });
});
