import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ReservedSql, Sql } from "postgres";
import { pageQuery } from "../../src/db/engine/pages.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import {
  executedPlan,
  expectIndexWalk,
  forgetStatistics,
  type PlanNode,
  readsOf,
  withGenericPlans,
} from "../helpers/plans.ts";

/**
 * A page is read by walking its index one row at a time (db/engine/pages.ts), so its plan does not
 * depend on what the planner believes of the table: the table is only ever read by index, and no
 * scan of it returns more than the page's rows, whether the table was never analyzed, was analyzed
 * small and then grew a thousandfold, or holds one large organization among many small ones. The
 * plans checked are the generic ones (what a pooled connection keeps after a few executions).
 */

let ctx: TestContext;
const LIMIT = 20;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

/** The generic plan of the page statement, executed (EXPLAIN ANALYZE, JSON), on one session. */
async function genericPlan(
  conn: ReservedSql,
  organizationId: string,
  startingAfter: string | undefined,
): Promise<PlanNode> {
  const sql = conn as unknown as Sql;
  const statement = pageQuery({
    sql,
    table: "calls",
    where: sql`organization_id = ${organizationId} and livemode = false`,
    prefix: "call",
    limit: LIMIT,
    startingAfter,
  });
  return executedPlan(conn, statement);
}

/** `count` completed test calls of an organization's agent, one per millisecond backwards from now. */
async function insertCalls(
  sql: Sql,
  seed: { org: { id: string }; agent: { id: string } },
  count: number,
  tag: string,
) {
  await sql`
    insert into calls (id, organization_id, livemode, status, agent_id, direction, created_at, updated_at)
    select 'call_' || ${tag} || lpad(i::text, 25, '0'), ${seed.org.id}, false, 'completed', ${seed.agent.id},
      'web', now() - i * interval '1 millisecond', now()
    from generate_series(1, ${count}) i`;
}

async function cursorAt(organizationId: string, depth: number): Promise<string> {
  const [row] = await ctx.deps.sql<{ id: string }[]>`
    select id from calls where organization_id = ${organizationId} and livemode = false
    order by created_at desc, id desc offset ${depth} limit 1`;
  return row!.id;
}

describe("the page statement walks the index whatever the statistics", () => {
  test("a table never analyzed, with 20,000 rows", async () => {
    const seed = await seedOrganization(ctx);
    const org = seed.org;
    await insertCalls(ctx.deps.sql, seed, 20_000, "a");
    await forgetStatistics(ctx.deps.sql, "calls");
    const deep = await cursorAt(org.id, 15_000);
    await withGenericPlans(ctx, async (conn) => {
      expectIndexWalk(await genericPlan(conn, org.id, undefined), "calls", LIMIT, "page 1");
      expectIndexWalk(await genericPlan(conn, org.id, deep), "calls", LIMIT, "page after 15,000");
    });
  });

  test("a table analyzed with 10 rows, then grown a thousandfold", async () => {
    const seed = await seedOrganization(ctx);
    const org = seed.org;
    await ctx.deps.sql`delete from calls`;
    await insertCalls(ctx.deps.sql, seed, 10, "b");
    await ctx.deps.sql`analyze calls`;
    await insertCalls(ctx.deps.sql, seed, 10_000, "c");
    const deep = await cursorAt(org.id, 9_000);
    await withGenericPlans(ctx, async (conn) => {
      expectIndexWalk(await genericPlan(conn, org.id, undefined), "calls", LIMIT, "page 1");
      expectIndexWalk(await genericPlan(conn, org.id, deep), "calls", LIMIT, "page after 9,000");
    });
  });

  test("one large organization among many small ones, analyzed", async () => {
    await ctx.deps.sql`delete from calls`;
    const small = await Promise.all(Array.from({ length: 30 }, () => seedOrganization(ctx)));
    for (const [i, s] of small.entries()) await insertCalls(ctx.deps.sql, s, 3, `s${i}`);
    const seed = await seedOrganization(ctx);
    const org = seed.org;
    await insertCalls(ctx.deps.sql, seed, 15_000, "d");
    await ctx.deps.sql`analyze calls`;
    const deep = await cursorAt(org.id, 12_000);
    await withGenericPlans(ctx, async (conn) => {
      expectIndexWalk(await genericPlan(conn, org.id, undefined), "calls", LIMIT, "large, page 1");
      expectIndexWalk(await genericPlan(conn, org.id, deep), "calls", LIMIT, "large, page after 12,000");
      expectIndexWalk(await genericPlan(conn, small[0]!.org.id, undefined), "calls", LIMIT, "small, page 1");
    });
  });

  test("the check can fail: a plain `order by … limit` on a table analyzed small, then grown, reads every row", async () => {
    const seed = await seedOrganization(ctx);
    await ctx.deps.sql`delete from calls`;
    await insertCalls(ctx.deps.sql, seed, 10, "e");
    await ctx.deps.sql`analyze calls`;
    await insertCalls(ctx.deps.sql, seed, 10_000, "f");
    await withGenericPlans(ctx, async (conn) => {
      const plan = await executedPlan(
        conn,
        conn`select * from calls where organization_id = ${seed.org.id} and livemode = false
          order by created_at desc, id desc limit ${conn.unsafe(String(LIMIT + 1))}` as never,
      );
      expect(readsOf(plan, "calls").some((n) => n["Actual Rows"]! > LIMIT + 1)).toBe(true);
    });
  });
});
