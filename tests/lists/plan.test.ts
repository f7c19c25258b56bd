import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Sql } from "postgres";
import { ManualClock } from "../../src/clock.ts";
import { paginate } from "../../src/db/engine/pages.ts";
import { eventsPage } from "../../src/db/events.ts";
import { recordEvent } from "../../src/services/events.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";

/**
 * The page statement is prepared once and its plan reused: PostgreSQL plans a prepared statement
 * afresh at each execution unless a generic plan costs no more, which a `limit` parameter prevents.
 * Planning took longer than reading the page, and longer with a cursor than without.
 */

let ctx: TestContext;
let orgId: string;
const ids: string[] = [];

beforeAll(async () => {
  const clock = new ManualClock("2026-11-22T09:00:00.000Z");
  ctx = await createTestContext({ clock });
  orgId = (await seedOrganization(ctx)).org.id;
  for (let i = 0; i < 30; i++) {
    clock.advance(1);
    ids.push(
      await recordEvent(ctx.deps.sql, ctx.deps, {
        organizationId: orgId,
        agentId: null,
        type: "call.started",
        livemode: false,
        data: {},
      }),
    );
  }
});
afterAll(() => ctx.close());

test("page 1 and a page after a cursor each run on a reused generic plan", async () => {
  // One session, so the prepared statements and their plan counters are the ones this test used.
  const conn = await ctx.deps.sql.reserve();
  try {
    const sql = conn as unknown as Sql;
    const scope = { organizationId: orgId, livemode: false, agentIds: null };
    for (let i = 0; i < 8; i++) {
      const first = await paginate(eventsPage(sql, scope, { limit: 7 }));
      expect(first.data.length).toBe(7);
      const after = await paginate(eventsPage(sql, scope, { limit: 7, starting_after: ids[20] }));
      expect((after.data as { id: string }[]).map((r) => r.id)).toEqual(ids.slice(13, 20).reverse());
    }
    const plans = await conn<{ statement: string; generic_plans: number; custom_plans: number }[]>`
      select statement, generic_plans::int, custom_plans::int from pg_prepared_statements
      where statement like '%from "events"%n < 8%' and statement not like '%pg_prepared_statements%'`;
    expect(plans.length).toBe(2);
    for (const p of plans) {
      expect(p.generic_plans).toBeGreaterThan(0);
      expect(p.custom_plans).toBeLessThanOrEqual(5);
    }
  } finally {
    conn.release();
  }
});
