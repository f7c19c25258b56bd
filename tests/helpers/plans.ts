import { expect } from "bun:test";
import type { Fragment, ReservedSql, Sql } from "postgres";
import type { TestContext } from "./app.ts";

/** Reading executed plans (EXPLAIN ANALYZE, JSON) to assert how a statement reads its tables. */

export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Parent Relationship"?: string;
  "Index Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  Plans?: PlanNode[];
}

export function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** A plan as indented lines (node, index, rows × loops, conditions), for failure messages. */
export function describePlan(n: PlanNode, depth = 0): string {
  const extra = n as PlanNode & { "Index Cond"?: string; Filter?: string };
  const line = `${"  ".repeat(depth)}${n["Node Type"]} ${n["Index Name"] ?? n["Relation Name"] ?? ""} rows=${n["Actual Rows"]} loops=${n["Actual Loops"]} ${extra["Index Cond"] ?? ""} ${extra.Filter ?? ""}`;
  return [line, ...(n.Plans ?? []).map((c) => describePlan(c, depth + 1))].join("\n");
}

/** The reads of `table` in a plan (its scans, not the update or delete of its rows). */
export function readsOf(plan: PlanNode, table: string): PlanNode[] {
  return nodes(plan).filter((n) => n["Relation Name"] === table && n["Node Type"] !== "ModifyTable");
}

/**
 * Runs `fn` on one session that uses generic plans only (what a pooled connection keeps after a few
 * executions of a prepared statement), inside a transaction rolled back at the end, so explaining a
 * statement that writes changes nothing.
 */
export async function withGenericPlans<T>(
  ctx: Pick<TestContext, "deps">,
  fn: (conn: ReservedSql) => Promise<T>,
): Promise<T> {
  const conn = await ctx.deps.sql.reserve();
  try {
    await conn`begin`;
    await conn`set local plan_cache_mode = force_generic_plan`;
    return await fn(conn);
  } finally {
    await conn`rollback`.catch(() => {});
    conn.release();
  }
}

/** The executed plan of `statement` on `conn`. */
export async function executedPlan(conn: ReservedSql, statement: Fragment): Promise<PlanNode> {
  const [row] = await conn<
    { "QUERY PLAN": [{ Plan: PlanNode }] }[]
  >`explain (analyze, format json) ${statement}`;
  return row!["QUERY PLAN"][0].Plan;
}

/** Forgets the statistics of `table`, as if it had never been analyzed (a test database is ours). */
export async function forgetStatistics(sql: Sql, table: string) {
  await sql`delete from pg_statistic where starelid = ${table}::regclass`;
  await sql`update pg_class set reltuples = -1, relpages = 0 where oid = ${table}::regclass`;
}

/**
 * No read of `table` is a sequential scan or returns more than `maxRows` rows: the statement stops
 * after what it needs, whatever the table holds.
 */
export function expectBoundedReads(plan: PlanNode, table: string, maxRows: number, label: string) {
  const reads = readsOf(plan, table);
  expect(reads.length, `${label}: reads ${table}`).toBeGreaterThan(0);
  for (const n of reads) {
    expect(n["Node Type"], `${label}: ${JSON.stringify(n)}`).not.toBe("Seq Scan");
    expect(n["Actual Rows"]!, `${label}: ${n["Node Type"]} on ${n["Index Name"]}`).toBeLessThanOrEqual(
      maxRows,
    );
  }
}

/**
 * A page read as an index walk (db/engine/pages.ts): no read of `table` returns more than the page's
 * rows (`limit + 1`) and none is a sequential scan; the walk's steps are ordered index scans under a
 * limit of one (the rows found are then fetched by primary key, however planned).
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
