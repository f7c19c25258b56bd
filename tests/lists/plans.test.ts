import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Sql } from "postgres";
import { callsPage } from "../../src/db/calls.ts";
import { pageQuery } from "../../src/db/engine/pages.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import {
  cursorAt,
  executedPlan,
  expectBoundedReads,
  expectListWalks,
  grow,
  HISTORIES,
  type ListCase,
  readsOf,
  rowsRead,
  withPlans,
} from "../helpers/plans.ts";

/**
 * A page of calls is read by walking an index one row at a time (db/engine/pages.ts), so its plan does
 * not depend on what the planner believes of the table: with every filter of the list, the table is
 * only ever read by index, and no scan of it reads more than the page's rows (rows its filter removed
 * included), whether the table was never analyzed, was analyzed small and then grew a thousandfold, or
 * holds one large organization among many small ones; generic plans (what a pooled connection keeps)
 * and custom ones. The statements are the list's own (callsPage), first page and after a deep cursor.
 *
 * The data makes a filter that is not read through an index of its own fail: the calls outside the
 * filters (another agent, another status, no campaign) are the newest, so a walk of the organization's
 * index with the filter checked row by row reads thousands of them before the first that matches; and
 * the table analyzed small holds only calls within every filter, so the statistics say each filter
 * keeps every row, which makes the organization's smaller index look as good as the filter's own.
 */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
/** Another agent of the organization, whose calls are the newest; and one with a few old calls. */
let other: { id: string };
let few: { id: string };
/** Organizations with a few calls each, for the history of one large organization among many. */
let small: Awaited<ReturnType<typeof seedOrganization>>[];
const LIMIT = 20;
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const CAMPAIGN = "cmp_01JDP000000000000000000000";

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await createAgent(ctx.deps, seed.org.id, { name: "Sales", active: true });
  few = await createAgent(ctx.deps, seed.org.id, { name: "Billing", active: true });
  small = await Promise.all(Array.from({ length: 20 }, () => seedOrganization(ctx)));
});
afterAll(() => ctx.close());

/**
 * `count` calls of an organization's agent, one per millisecond backwards from `ago` seconds ago; ids
 * well formed (`tag`: a few id characters of their own).
 */
function insertCalls(
  sql: Sql,
  c: {
    org: string;
    agent: string;
    count: number;
    tag: string;
    ago: number;
    status?: string;
    campaign?: string | null;
    livemode?: boolean;
  },
) {
  return sql`
    insert into calls (id, organization_id, livemode, status, agent_id, campaign_id, direction, created_at, updated_at)
    select 'call_' || ${c.tag} || lpad(i::text, ${26 - c.tag.length}, '0'), ${c.org}, ${c.livemode ?? false},
      ${c.status ?? "completed"}, ${c.agent}, ${c.campaign ?? null}, 'web',
      now() - ${c.ago} * interval '1 second' - i * interval '1 millisecond', now()
    from generate_series(1, ${c.count}) i`;
}

const filling = (sql: Sql) => {
  const org = seed.org.id;
  const agent = seed.agent.id;
  return {
    // Every filter tested keeps each of these: the agent, completed, the campaign.
    few: () => insertCalls(sql, { org, agent, count: 10, tag: "A", ago: 7200, campaign: CAMPAIGN }),
    many: async () => {
      await insertCalls(sql, { org, agent: other.id, count: 8_000, tag: "B", ago: 0, status: "failed" });
      await insertCalls(sql, { org, agent, count: 2_000, tag: "C", ago: 3600, campaign: CAMPAIGN });
      await insertCalls(sql, { org, agent: few.id, count: 50, tag: "D", ago: 5400 });
      await insertCalls(sql, { org, agent, count: 200, tag: "E", ago: 9000, livemode: true });
    },
    elsewhere: () =>
      Promise.all(
        small.map((s, i) =>
          insertCalls(sql, { org: s.org.id, agent: s.agent.id, count: 3, tag: `F${CROCKFORD[i]}`, ago: 0 }),
        ),
      ),
  };
};

/** Every filter of the calls list, and the scopes of keys restricted to some agents. */
async function lists(): Promise<ListCase[]> {
  const org = seed.org.id;
  const agent = seed.agent.id;
  const cases: Omit<ListCase, "deep">[] = [];
  const add = (
    label: string,
    scope: { livemode?: boolean; agentIds?: string[] },
    q: { status?: string; agentId?: string; campaignId?: string },
  ) =>
    cases.push({
      label,
      page: (sql, limit, startingAfter) =>
        callsPage(
          sql,
          { organizationId: org, livemode: scope.livemode ?? false, agentIds: scope.agentIds ?? null },
          { limit, starting_after: startingAfter, ...q },
        ),
    });
  add("no filter", {}, {});
  add("live mode", { livemode: true }, {});
  add("status", {}, { status: "completed" });
  add("agentId", {}, { agentId: agent });
  add("campaignId", {}, { campaignId: CAMPAIGN });
  add("key restricted to one agent", { agentIds: [agent] }, {});
  add("key restricted to two agents", { agentIds: [agent, few.id] }, {});
  add("key restricted to two agents, agentId", { agentIds: [agent, few.id] }, { agentId: agent });
  add("key restricted to two agents, campaignId", { agentIds: [agent, few.id] }, { campaignId: CAMPAIGN });
  return Promise.all(
    cases.map(async (c) => ({
      ...c,
      deep: await cursorAt(
        (limit, after) => c.page(ctx.deps.sql, limit, after),
        c.label === "live mode" ? 100 : 1_000,
      ),
    })),
  );
}

describe("a calls page walks an index of its filter whatever the statistics", () => {
  for (const history of HISTORIES) {
    test(history, async () => {
      await grow(ctx.deps.sql, "calls", history, filling(ctx.deps.sql));
      await expectListWalks(ctx, "calls", await lists(), LIMIT);
    });
  }

  test("an agentId outside the key's agents reads no call", async () => {
    await withPlans(ctx, async (conn) => {
      const sql = conn as unknown as Sql;
      const scope = { organizationId: seed.org.id, livemode: false, agentIds: [few.id] };
      const plan = await executedPlan(
        conn,
        pageQuery(callsPage(sql, scope, { limit: LIMIT, agentId: other.id })),
      );
      expect(plan["Actual Rows"]).toBe(0);
      for (const n of readsOf(plan, "calls")) expect(rowsRead(n)).toBe(0);
    });
  });
});

describe("the checks can fail", () => {
  beforeAll(() => grow(ctx.deps.sql, "calls", HISTORIES[1], filling(ctx.deps.sql)));

  test("a page read by a bitmap scan and a sort of every row of the organization is refused", async () => {
    await withPlans(ctx, async (conn) => {
      // The plan the planner makes of a plain `order by … limit` when it believes the table small.
      await conn`set local enable_indexscan = off`;
      await conn`set local enable_indexonlyscan = off`;
      const plan = await executedPlan(
        conn,
        conn`select * from calls where organization_id = ${seed.org.id} and livemode = false
          order by created_at desc, id desc limit ${conn.unsafe(String(LIMIT + 1))}` as never,
      );
      expect(readsOf(plan, "calls").some((n) => n["Actual Rows"]! > LIMIT + 1)).toBe(true);
      expect(() => expectBoundedReads(plan, "calls", LIMIT + 1, "sorted")).toThrow();
    });
  });

  test("a scan that returns a page but removes thousands of rows by its filter is refused", async () => {
    await withPlans(ctx, async (conn) => {
      // The agent checked row by row along the organization's index: what a filter without an index
      // of its own, or a planner preferring the smaller index, does.
      await conn`set local enable_bitmapscan = off`;
      await conn`set local enable_sort = off`;
      const plan = await executedPlan(
        conn,
        conn`select id from calls where organization_id = ${seed.org.id} and livemode = false
          and agent_id || '' = ${seed.agent.id}
          order by created_at desc, id desc limit ${conn.unsafe(String(LIMIT + 1))}` as never,
      );
      const reads = readsOf(plan, "calls");
      // Each scan returns no more than the page: only the rows its filter removed tell.
      expect(reads.every((n) => n["Actual Rows"]! <= LIMIT + 1)).toBe(true);
      expect(() => expectBoundedReads(plan, "calls", LIMIT + 1, "filtered")).toThrow();
    });
  });
});
