import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Sql } from "postgres";
import { pageQuery } from "../../src/db/engine/pages.ts";
import { eventsPage } from "../../src/db/events.ts";
import { claimSql } from "../../src/db/sessionTokens.ts";
import { claimDueSql, claimPlanning } from "../../src/db/timers.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import {
  executedPlan,
  expectBoundedReads,
  expectIndexWalk,
  forgetStatistics,
  nodes,
  type PlanNode,
  readsOf,
  withGenericPlans,
} from "../helpers/plans.ts";

/**
 * The hot statements besides the lists of calls (tests/lists/plans.test.ts): the events list, the
 * claim of a session token and the claim of due timers. Each reads only the rows it needs whether its
 * table was never analyzed or was analyzed small and then grew a thousandfold, with generic plans
 * (what a pooled connection keeps). Statements that write run inside a transaction rolled back.
 */

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

type Seed = Awaited<ReturnType<typeof seedOrganization>>;

/** The two histories a table can have when a statement meets it. */
const HISTORIES = [
  { name: "never analyzed, 20,000 rows", small: 0, grown: 20_000 },
  { name: "analyzed with 10 rows, then grown a thousandfold", small: 10, grown: 10_000 },
] as const;

/** Fills `table` through `insert` as `history` says: some rows, analyze, then many more (or forget). */
async function grow(
  sql: Sql,
  table: string,
  history: (typeof HISTORIES)[number],
  insert: (count: number, tag: string) => Promise<unknown>,
) {
  await sql`delete from ${sql(table)}`;
  if (history.small > 0) {
    await insert(history.small, "s");
    await sql`analyze ${sql(table)}`;
    await insert(history.grown, "g");
  } else {
    await insert(history.grown, "g");
    await forgetStatistics(sql, table);
  }
}

describe("the events list walks its index", () => {
  const LIMIT = 20;
  for (const history of HISTORIES) {
    test(history.name, async () => {
      const seed = await seedOrganization(ctx);
      const sql = ctx.deps.sql;
      const other = await createAgent(ctx.deps, seed.org.id, { name: "Sales", active: true });
      await grow(sql, "events", history, async (count, tag) => {
        await insertEvents(sql, seed.org.id, seed.agent.id, count, tag);
        await insertEvents(sql, seed.org.id, other.id, count / 10, `${tag}o`);
      });
      const scopes = [
        { label: "all", scope: { agentIds: null }, q: {} },
        { label: "by type", scope: { agentIds: null }, q: { type: "call.ended" as const } },
        { label: "key restricted to its agent", scope: { agentIds: [seed.agent.id] }, q: {} },
        { label: "key restricted to two agents", scope: { agentIds: [seed.agent.id, other.id] }, q: {} },
      ];
      await withGenericPlans(ctx, async (conn) => {
        const s = conn as unknown as Sql;
        for (const { label, scope, q } of scopes) {
          const statement = pageQuery(
            eventsPage(s, { organizationId: seed.org.id, livemode: false, ...scope }, { limit: LIMIT, ...q }),
          );
          const plan = await executedPlan(conn, statement);
          expectIndexWalk(plan, "events", LIMIT, label);
        }
      });
    });
  }
});

describe("the claim of a session token reads one row by its hash", () => {
  for (const history of HISTORIES) {
    test(history.name, async () => {
      const seed = await seedOrganization(ctx);
      const sql = ctx.deps.sql;
      await grow(sql, "session_tokens", history, (count, tag) => insertTokens(sql, seed, count, tag));
      const [target] = await sql<{ token_hash: Uint8Array }[]>`
        select token_hash from session_tokens order by created_at desc limit 1`;
      await withGenericPlans(ctx, async (conn) => {
        const s = conn as unknown as Sql;
        const plan = await executedPlan(
          conn,
          claimSql(s, target!.token_hash, new Date(), { livemode: false }),
        );
        expectBoundedReads(plan, "session_tokens", 1, "claim");
        // By its primary key: an index scan, or a bitmap heap scan of the key's bitmap.
        const read = readsOf(plan, "session_tokens")[0]!;
        expect(nodes(read).map((n) => n["Index Name"])).toContain("session_tokens_pkey");
        // It did claim the token: the statement was the real one, not an empty shape.
        expect(plan["Actual Rows"]).toBe(1);
      });
    });
  }
});

describe("the claim of due timers stops after its limit on a backlog", () => {
  const LIMIT = 50;
  for (const history of HISTORIES) {
    test(history.name, async () => {
      const sql = ctx.deps.sql;
      await grow(sql, "timers", history, (count) => insertOverdueTimers(sql, count));
      await withGenericPlans(ctx, async (conn) => {
        const s = conn as unknown as Sql;
        await claimPlanning(s);
        const plan = await executedPlan(
          conn,
          claimDueSql(s, { runner: 1, horizonMs: 500, leaseMs: 30_000, limit: LIMIT }),
        );
        // The due rows are found by the ordered index, not by reading the whole backlog; the update
        // then touches each claimed row once.
        expectBoundedReads(plan, "timers", LIMIT, "claim");
        expect(readsOf(plan, "timers").some((n) => n["Index Name"] === "timers_due")).toBe(true);
        expect(plan["Actual Rows"]).toBe(LIMIT);
      });
    });
  }
});

describe("the claim of due timers is never compiled", () => {
  test("its sorts priced out of reach do not make PostgreSQL compile it to machine code (JIT) at every poll", async () => {
    const sql = ctx.deps.sql;
    const [jit] = await sql<{ available: boolean }[]>`select pg_jit_available() as available`;
    await withGenericPlans(ctx, async (conn) => {
      const s = conn as unknown as Sql;
      const claim = claimDueSql(s, { runner: 1, horizonMs: 500, leaseMs: 30_000, limit: 50 });
      const explained = async () => {
        const [row] = await conn<{ "QUERY PLAN": [{ Plan: PlanNode; JIT?: unknown }] }[]>`
          explain (analyze, format json) ${claim}`;
        return row!["QUERY PLAN"][0];
      };
      if (jit!.available) {
        // Without the claim's own settings compilation stays on; with the sorts off, the estimate
        // passes every threshold and the claim is compiled (a second of CPU on a loaded machine).
        await s`set local enable_sort = off`;
        expect((await explained()).JIT).toBeDefined();
      }
      await claimPlanning(s);
      expect((await explained()).JIT).toBeUndefined();
    });
  });
});

/** `count` events of an organization's test mode and one of its agents, one per millisecond backwards, of two types. */
function insertEvents(sql: Sql, organizationId: string, agentId: string, count: number, tag: string) {
  return sql`
    insert into events (id, organization_id, type, livemode, data, agent_id, created_at)
    select 'evt_' || ${tag} || lpad(i::text, 24, '0'), ${organizationId},
      case when i % 2 = 0 then 'call.ended' else 'call.started' end, false, '{}'::jsonb, ${agentId},
      now() - i * interval '1 millisecond'
    from generate_series(1, ${count}) i`;
}

/** `count` unspent test session tokens of the organization's test key, valid for an hour. */
function insertTokens(sql: Sql, seed: Seed, count: number, tag: string) {
  return sql`
    insert into session_tokens (token_hash, organization_id, livemode, secret_key_id, agent_id, expires_at, created_at)
    select sha256(convert_to(${tag} || i::text, 'UTF8')), ${seed.org.id}, false, ${seed.test.id}, ${seed.agent.id},
      now() + interval '1 hour', now() - i * interval '1 millisecond'
    from generate_series(1, ${count}) i`;
}

/** `count` pending timers all overdue (a backlog after a pause), of a kind no runner handles here. */
function insertOverdueTimers(sql: Sql, count: number) {
  return sql`
    insert into timers (kind, due_at, payload)
    select 'plan.test', now() - i * interval '1 millisecond', '{}'::jsonb
    from generate_series(1, ${count}) i`;
}
