import { expect } from "bun:test";
import { Buffer } from "node:buffer";
import type { Fragment, ReservedSql, Sql } from "postgres";
import { LIMIT_MAX, type PageRequest, pageQuery, paginate } from "../../src/db/engine/pages.ts";
import type { TestContext } from "./app.ts";

/** Reading executed plans (EXPLAIN ANALYZE, JSON) to assert how a statement reads its tables. */

export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Parent Relationship"?: string;
  "Index Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  /** Per loop, as "Actual Rows" (PostgreSQL shows both as averages over the loops). */
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  Plans?: PlanNode[];
}

export function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** A plan as indented lines (node, index, rows × loops, conditions), for failure messages. */
export function describePlan(n: PlanNode, depth = 0): string {
  const extra = n as PlanNode & { "Index Cond"?: string; Filter?: string };
  const removed = n["Rows Removed by Filter"] ? ` removed=${n["Rows Removed by Filter"]}` : "";
  const line = `${"  ".repeat(depth)}${n["Node Type"]} ${n["Index Name"] ?? n["Relation Name"] ?? ""} rows=${n["Actual Rows"]}${removed} loops=${n["Actual Loops"]} ${extra["Index Cond"] ?? ""} ${extra.Filter ?? ""}`;
  return [line, ...(n.Plans ?? []).map((c) => describePlan(c, depth + 1))].join("\n");
}

/** The reads of `table` in a plan (its scans, not the update or delete of its rows). */
export function readsOf(plan: PlanNode, table: string): PlanNode[] {
  return nodes(plan).filter((n) => n["Relation Name"] === table && n["Node Type"] !== "ModifyTable");
}

/**
 * Runs `fn` on one session that uses generic plans only (what a pooled connection keeps after a few
 * executions of a prepared statement), or custom plans only (its first executions, planned for the
 * values given), inside a transaction rolled back at the end, so explaining a statement that writes
 * changes nothing.
 */
export async function withPlans<T>(
  ctx: Pick<TestContext, "deps">,
  fn: (conn: ReservedSql) => Promise<T>,
  plans: PlanMode = "generic",
): Promise<T> {
  const conn = await ctx.deps.sql.reserve();
  try {
    await conn`begin`;
    await conn.unsafe(`set local plan_cache_mode = force_${plans}_plan`);
    return await fn(conn);
  } finally {
    await conn`rollback`.catch(() => {});
    conn.release();
  }
}

/** How a session plans a prepared statement: once for any values, or for the values of each execution. */
export const PLAN_MODES = ["generic", "custom"] as const;
export type PlanMode = (typeof PLAN_MODES)[number];

/**
 * The executed plan of `statement` on `conn`, planned as the session's `plan_cache_mode` says (see
 * `withPlans`). The statement is prepared under a name and run by EXECUTE with its values written in:
 * EXPLAIN of a statement with bound parameters would plan it for those values (a custom plan) whatever
 * that setting.
 */
export async function executedPlan(conn: ReservedSql, statement: Fragment): Promise<PlanNode> {
  const query = conn`${statement}` as unknown as DescribedQuery;
  const { types } = await query.describe();
  const typeNames = (
    await conn<{ name: string }[]>`
      select t::regtype::text as name from unnest(${types}::oid[]) with ordinality as u(t, i) order by i`
  ).map((r) => r.name);
  const name = `explained_${++explained}`;
  await conn.unsafe(
    `prepare ${name}${typeNames.length ? `(${typeNames.join(", ")})` : ""} as ${query.string}`,
  );
  try {
    const args = query.parameters.map(
      (v, i) =>
        `${/^jsonb?$/.test(typeNames[i]!) ? literal(JSON.stringify(v)) : literal(v)}::${typeNames[i]}`,
    );
    const [row] = await conn.unsafe<{ "QUERY PLAN": [{ Plan: PlanNode }] }[]>(
      `explain (analyze, format json) execute ${name}${args.length ? `(${args.join(", ")})` : ""}`,
    );
    return row!["QUERY PLAN"][0].Plan;
  } finally {
    await conn.unsafe(`deallocate ${name}`);
  }
}

/** What the driver made of a statement once described: its text with $n, and the values for them. */
interface DescribedQuery {
  describe(): Promise<{ types: number[] }>;
  string: string;
  parameters: unknown[];
}

let explained = 0;

/** A value as an SQL literal (the values of the statements explained here: text, booleans, arrays; JSON as its text). */
function literal(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (Array.isArray(v)) return `array[${v.map(literal).join(", ")}]`;
  if (v instanceof Date) return literal(v.toISOString());
  if (typeof v === "string") return `'${v.replaceAll("'", "''")}'`;
  if (v instanceof Uint8Array) return `'\\x${Buffer.from(v).toString("hex")}'`;
  return String(v);
}

/** Forgets the statistics of `table`, as if it had never been analyzed (a test database is ours). */
export async function forgetStatistics(sql: Sql, table: string) {
  await sql`delete from pg_statistic where starelid = ${table}::regclass`;
  await sql`update pg_class set reltuples = -1, relpages = 0 where oid = ${table}::regclass`;
}

/**
 * The histories a table can have when a statement meets it: never analyzed; analyzed while it held a
 * few rows, all in the filters' scope (so the statistics say each filter keeps every row), then grown a
 * thousandfold; one large organization among many small ones, analyzed.
 */
export const HISTORIES = [
  "never analyzed",
  "analyzed with 10 rows, then grown a thousandfold",
  "one large organization among many small ones, analyzed",
] as const;
export type History = (typeof HISTORIES)[number];

/** How a test fills a table for each history (`grow`). */
export interface Filling {
  /** 10 rows, every one in the scope of every filter tested. */
  few(): Promise<unknown>;
  /** About 10,000 rows of the organization tested: the rows outside the filters newer than those in them. */
  many(): Promise<unknown>;
  /** A few rows of each of many other organizations (or of many other parents: endpoints, knowledge bases). */
  elsewhere(): Promise<unknown>;
}

/**
 * Empties `table` (and the tables whose rows refer to it), then fills it and leaves its statistics as
 * `history` says. Emptied by truncation, so that the table starts as new: rows deleted but not vacuumed
 * would stay in its pages, and statistics taken then would tell the planner that those pages hold
 * almost no rows, a history of its own (a mass deletion) that the statistics timer corrects within a
 * minute (db/statistics.ts).
 */
export async function grow(sql: Sql, table: string, history: History, fill: Filling) {
  await sql`truncate ${sql(table)} cascade`;
  if (history === "never analyzed") {
    await fill.many();
    await forgetStatistics(sql, table);
  } else if (history === "analyzed with 10 rows, then grown a thousandfold") {
    await fill.few();
    await sql`analyze ${sql(table)}`;
    await fill.many();
  } else {
    await fill.elsewhere();
    await fill.many();
    await sql`analyze ${sql(table)}`;
  }
}

/** A list's page statement, whatever its rows. */
export type AnyPageRequest = PageRequest<never>;

/**
 * The cursor `depth` items into a list: the id of its item number `depth`, found by paging the list's
 * real statement 100 items at a time. `shown` gives the id as the API shows it (serial ids).
 */
export async function cursorAt(
  page: (limit: number, startingAfter: string | undefined) => AnyPageRequest,
  depth: number,
  shown: (row: { id: string; created_at: Date }) => string = (row) => row.id,
): Promise<string> {
  let cursor: string | undefined;
  for (let seen = 0; seen < depth; ) {
    const take = Math.min(LIMIT_MAX, depth - seen);
    const { data } = await paginate(
      page(take, cursor) as unknown as PageRequest<{ id: string; created_at: Date }>,
    );
    if (data.length < take) throw new Error(`the list holds fewer than ${depth} items`);
    cursor = shown(data.at(-1)!);
    seen += take;
  }
  return cursor!;
}

/**
 * The rows a scan read over all its loops: those it returned and those its filter (or a bitmap's
 * recheck) removed. PostgreSQL shows each as an average per loop, rounded: this is about the total.
 */
export function rowsRead(n: PlanNode): number {
  const perLoop =
    (n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0) + (n["Rows Removed by Index Recheck"] ?? 0);
  return perLoop * (n["Actual Loops"] ?? 1);
}

/**
 * No read of `table` is a sequential scan or reads more than `maxRows` rows over all its loops, counting
 * the rows its filter removed: the statement stops after what it needs, whatever the table holds.
 */
export function expectBoundedReads(plan: PlanNode, table: string, maxRows: number, label: string) {
  const reads = readsOf(plan, table);
  expect(reads.length, `${label}: reads ${table}`).toBeGreaterThan(0);
  for (const n of reads) {
    expect(n["Node Type"], `${label}: ${JSON.stringify(n)}`).not.toBe("Seq Scan");
    expect(
      rowsRead(n),
      `${label}: ${n["Node Type"]} on ${n["Index Name"] ?? table} read too many rows:\n${describePlan(plan)}`,
    ).toBeLessThanOrEqual(maxRows);
  }
}

/**
 * A page read as an index walk (db/engine/pages.ts): no read of `table` reads more than the page's rows
 * (`limit + 1`, rows its filter removed included) and none is a sequential scan; the walk's steps are
 * ordered index scans under a limit of one (the rows found are then fetched by primary key, however
 * planned).
 */
export function expectIndexWalk(plan: PlanNode, table: string, limit: number, label: string) {
  expectBoundedReads(plan, table, limit + 1, label);
  // A step's scan sits right under its limit, or under an incremental sort of the index's order (the
  // planner may take an index on `created_at` alone and order ties by `id` as it goes).
  const isRead = (c: PlanNode) => c["Relation Name"] === table && c["Parent Relationship"] !== "InitPlan";
  const stepScan = (n: PlanNode): PlanNode | undefined =>
    n.Plans?.find(isRead) ??
    n.Plans?.find((c) => c["Node Type"] === "Incremental Sort" && c.Plans?.some(isRead))?.Plans?.find(isRead);
  const steps = nodes(plan).filter((n) => n["Node Type"] === "Limit" && stepScan(n));
  expect(steps.length, `${label}:\n${describePlan(plan)}`).toBeGreaterThanOrEqual(2);
  for (const step of steps) {
    const scan = stepScan(step)!;
    expect(["Index Scan", "Index Only Scan"], `${label}: a step is ${scan["Node Type"]}`).toContain(
      scan["Node Type"],
    );
  }
}

/** A list as a plan test reads it: its real page statement, and a cursor deep into it. */
export interface ListCase {
  label: string;
  page(sql: Sql, limit: number, startingAfter: string | undefined): AnyPageRequest;
  /** A cursor with at least a page of the list after it (`cursorAt`); null for a list of a few items. */
  deep: string | null;
  /**
   * The rows its first page holds: by default a whole page and one more (`has_more`). A list of fewer
   * (one entry by a unique key) need not be walked: every read of it is bounded by those rows.
   */
  rows?: number;
}

/**
 * Each list's first page and its page after the deep cursor walk `table`'s index (`expectIndexWalk`)
 * and return their rows (a whole page: `limit` items and one to tell `has_more`), with generic and
 * custom plans.
 */
export async function expectListWalks(
  ctx: Pick<TestContext, "deps">,
  table: string,
  lists: readonly ListCase[],
  limit: number,
) {
  for (const mode of PLAN_MODES) {
    await withPlans(
      ctx,
      async (conn) => {
        const sql = conn as unknown as Sql;
        for (const list of lists) {
          const pages: [string, string | undefined][] = [["page 1", undefined]];
          if (list.deep !== null) pages.push(["page after a deep cursor", list.deep]);
          for (const [at, cursor] of pages) {
            const label = `${list.label}, ${at}, ${mode} plan`;
            const plan = await executedPlan(conn, pageQuery(list.page(sql, limit, cursor)));
            const rows = list.rows ?? limit + 1;
            if (rows > limit) expectIndexWalk(plan, table, limit, label);
            else expectBoundedReads(plan, table, rows, label);
            expect(plan["Actual Rows"], `${label}: its rows`).toBe(rows);
          }
        }
      },
      mode,
    );
  }
}
