import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Sql } from "postgres";
import { inProgressSql, makeCallLimitsSql } from "../../src/db/callAdmission.ts";
import { eventsPage } from "../../src/db/events.ts";
import { foldPlanReturnsSql, planUsedSql } from "../../src/db/minutes.ts";
import { decideSql } from "../../src/db/phonePlacements.ts";
import { claimSql } from "../../src/db/sessionTokens.ts";
import { claimDueSql, claimPlanning, insertTimersFrom } from "../../src/db/timers.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import {
  cursorAt,
  describePlan,
  executedPlan,
  expectBoundedReads,
  expectListWalks,
  grow,
  HISTORIES,
  type ListCase,
  nodes,
  PLAN_MODES,
  type PlanNode,
  readsOf,
  withPlans,
} from "../helpers/plans.ts";

/**
 * The hot statements besides the lists of calls (tests/lists/plans.test.ts): the events list, the
 * claim of a session token and the claim of due timers. Each reads only the rows it needs whether its
 * table was never analyzed, was analyzed small and then grew a thousandfold, or holds one large
 * organization among many small ones, with generic plans (what a pooled connection keeps) and custom
 * ones. Statements that write run inside a transaction rolled back.
 */

let ctx: TestContext;
let seed: Seed;
/** Another agent of the organization, whose events are the newest; and one with a few old events. */
let other: { id: string };
let few: { id: string };
/** Organizations with a few rows each, for the history of one large organization among many. */
let small: Seed[];
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await createAgent(ctx.deps, seed.org.id, { name: "Sales", active: true });
  few = await createAgent(ctx.deps, seed.org.id, { name: "Billing", active: true });
  small = await Promise.all(Array.from({ length: 20 }, () => seedOrganization(ctx)));
});
afterAll(() => ctx.close());

type Seed = Awaited<ReturnType<typeof seedOrganization>>;

describe("the events list walks an index of its filter", () => {
  const LIMIT = 20;
  const scope = (agentIds: string[] | null) => ({ organizationId: seed.org.id, livemode: false, agentIds });
  for (const history of HISTORIES) {
    test(history, async () => {
      const sql = ctx.deps.sql;
      const org = seed.org.id;
      const agent = seed.agent.id;
      await grow(sql, "events", history, {
        // Every filter tested keeps each of these: the agent's, of the type.
        few: () => insertEvents(sql, { org, agent, count: 10, tag: "A", ago: 7200, type: "call.ended" }),
        many: async () => {
          await insertEvents(sql, {
            org,
            agent: other.id,
            count: 8_000,
            tag: "B",
            ago: 0,
            type: "call.started",
          });
          await insertEvents(sql, { org, agent, count: 2_000, tag: "C", ago: 3600, type: "call.ended" });
          await insertEvents(sql, { org, agent: few.id, count: 50, tag: "D", ago: 5400, type: "call.ended" });
        },
        elsewhere: () =>
          Promise.all(
            small.map((s, i) =>
              insertEvents(sql, {
                org: s.org.id,
                agent: s.agent.id,
                count: 3,
                tag: `F${CROCKFORD[i]}`,
                ago: 0,
              }),
            ),
          ),
      });
      const lists: Omit<ListCase, "deep">[] = [
        {
          label: "all",
          page: (s, limit, after) => eventsPage(s, scope(null), { limit, starting_after: after }),
        },
        {
          label: "by type",
          page: (s, limit, after) =>
            eventsPage(s, scope(null), { limit, starting_after: after, type: "call.ended" }),
        },
        {
          label: "key restricted to its agent",
          page: (s, limit, after) => eventsPage(s, scope([agent]), { limit, starting_after: after }),
        },
        {
          label: "key restricted to two agents",
          page: (s, limit, after) => eventsPage(s, scope([agent, few.id]), { limit, starting_after: after }),
        },
      ];
      await expectListWalks(
        ctx,
        "events",
        await Promise.all(
          lists.map(async (l) => ({
            ...l,
            deep: await cursorAt((limit, after) => l.page(sql, limit, after), 1_000),
          })),
        ),
        LIMIT,
      );
    });
  }
});

describe("the claim of a session token reads one row by its hash", () => {
  for (const history of HISTORIES) {
    test(history, async () => {
      const sql = ctx.deps.sql;
      await grow(sql, "session_tokens", history, {
        few: () => insertTokens(sql, seed, 10, "s"),
        many: () => insertTokens(sql, seed, 10_000, "g"),
        elsewhere: () => Promise.all(small.map((s, i) => insertTokens(sql, s, 3, `e${i}`))),
      });
      const [target] = await sql<{ token_hash: Uint8Array }[]>`
        select token_hash from session_tokens where organization_id = ${seed.org.id}
        order by created_at desc limit 1`;
      for (const mode of PLAN_MODES) {
        await withPlans(
          ctx,
          async (conn) => {
            const s = conn as unknown as Sql;
            const plan = await executedPlan(
              conn,
              claimSql(s, target!.token_hash, new Date(), { livemode: false }),
            );
            expectBoundedReads(plan, "session_tokens", 1, `claim, ${mode} plan`);
            // By its primary key: an index scan, or a bitmap heap scan of the key's bitmap.
            const read = readsOf(plan, "session_tokens")[0]!;
            expect(nodes(read).map((n) => n["Index Name"])).toContain("session_tokens_pkey");
            // It did claim the token: the statement was the real one, not an empty shape.
            expect(plan["Actual Rows"]).toBe(1);
          },
          mode,
        );
      }
    });
  }
});

describe("the claim of due timers stops after its limit on a backlog", () => {
  const LIMIT = 50;
  for (const history of HISTORIES) {
    test(history, async () => {
      const sql = ctx.deps.sql;
      await grow(sql, "timers", history, {
        few: () => insertOverdueTimers(sql, 10),
        many: () => insertOverdueTimers(sql, 10_000),
        // Timers are not an organization's: many timers of other kinds, not yet due, stand for the rest.
        elsewhere: () => insertLaterTimers(sql, 500),
      });
      for (const mode of PLAN_MODES) {
        await withPlans(
          ctx,
          async (conn) => {
            const s = conn as unknown as Sql;
            await claimPlanning(s);
            const plan = await executedPlan(
              conn,
              claimDueSql(s, { runner: 1, horizonMs: 500, leaseMs: 30_000, limit: LIMIT }),
            );
            // The due rows are found by the ordered index, not by reading the whole backlog; the update
            // then touches each claimed row once.
            expectBoundedReads(plan, "timers", LIMIT, `claim, ${mode} plan`);
            expect(readsOf(plan, "timers").some((n) => n["Index Name"] === "timers_due")).toBe(true);
            expect(plan["Actual Rows"]).toBe(LIMIT);
          },
          mode,
        );
      }
    });
  }
});

/**
 * `count` events of an organization's agent, one per millisecond backwards from `ago` seconds ago;
 * ids well formed (`tag`: a few id characters of their own).
 */
function insertEvents(
  sql: Sql,
  e: { org: string; agent: string; count: number; tag: string; ago: number; type?: string },
) {
  return sql`
    insert into events (id, organization_id, type, livemode, data, agent_id, created_at)
    select 'evt_' || ${e.tag} || lpad(i::text, ${26 - e.tag.length}, '0'), ${e.org},
      ${e.type ?? "call.started"}, false, '{}'::jsonb, ${e.agent},
      now() - ${e.ago} * interval '1 second' - i * interval '1 millisecond'
    from generate_series(1, ${e.count}) i`;
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

/** `count` pending timers due in an hour, of a kind no runner handles here. */
function insertLaterTimers(sql: Sql, count: number) {
  return sql`
    insert into timers (kind, due_at, payload)
    select 'plan.later', now() + interval '1 hour', '{}'::jsonb
    from generate_series(1, ${count}) i`;
}

describe("the organization's limits, read by every live phone call's placement", () => {
  /**
   * 3,000 live phone calls that were in progress and ended (each left an entry in the index of calls
   * in progress, which stays until a vacuum), 5 still in progress, and the organization's limits row.
   */
  async function organizationWithEndedCalls(): Promise<string> {
    const s = await seedOrganization(ctx);
    const sql = ctx.deps.sql;
    const insert = (count: number, tag: string) => sql`
      insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at, updated_at)
      select 'call_' || ${tag} || lpad(i::text, ${26 - tag.length}, '0'), ${s.org.id}, true, 'initiated',
        ${s.agent.id}, '+33612345678', 'outbound', now() - i * interval '1 millisecond',
        now() - i * interval '1 millisecond', now()
      from generate_series(1, ${count}) i`;
    await insert(3_000, `L${s.org.id.slice(-4)}`);
    await sql`update calls set status = 'ringing' where organization_id = ${s.org.id}`;
    await sql`update calls set status = 'completed' where organization_id = ${s.org.id}`;
    await insert(5, `M${s.org.id.slice(-4)}`);
    await sql`update calls set status = 'ongoing' where organization_id = ${s.org.id} and status = 'initiated'`;
    await sql`
      insert into call_limits (organization_id, hour_cut, hour_count)
      values (${s.org.id}, now() - interval '1 hour', 3005)`;
    return s.org.id;
  }

  for (const mode of PLAN_MODES) {
    test(`calls in progress are counted by a plain index scan, never an index-only one (${mode} plan)`, async () => {
      const org = await organizationWithEndedCalls();
      await withPlans(
        ctx,
        async (conn) => {
          // An index-only scan never marks the entries of ended calls dead: every placement would visit
          // the heap of each call that ever ran until a vacuum. A plain index scan marks them once seen.
          const counted = () => conn`select ${inProgressSql(conn, conn`${org}::text`)} as n`;
          await counted();
          const plan = await executedPlan(conn, counted());
          const inProgress = nodes(plan).filter((n) => n["Index Name"] === "calls_live_phone_in_progress");
          expect(inProgress.length, describePlan(plan)).toBeGreaterThan(0);
          for (const n of inProgress) {
            expect(n["Node Type"], describePlan(plan)).toBe("Index Scan");
            expect(n["Actual Rows"], describePlan(plan)).toBe(5);
          }
        },
        mode,
      );
    });
  }

  test("the limits rows' lock counts the hour only when it makes the row", async () => {
    const org = await organizationWithEndedCalls();
    const fresh = await seedOrganization(ctx);
    const hourAgo = new Date(Date.now() - 3_600_000);
    await withPlans(ctx, async (conn) => {
      const existing = await executedPlan(conn, makeCallLimitsSql(conn, [org], hourAgo));
      const counted = readsOf(existing, "calls");
      expect(counted.length, describePlan(existing)).toBeGreaterThan(0);
      for (const n of counted) expect(n["Actual Loops"], describePlan(existing)).toBe(0);
      const made = await executedPlan(conn, makeCallLimitsSql(conn, [fresh.org.id], hourAgo));
      expect(Math.max(...readsOf(made, "calls").map((n) => n["Actual Loops"] ?? 0))).toBe(1);
    });
  });
});

describe("the plan minutes an organization used, read and locked by every live call's placement", () => {
  /** 3,000 settled reservations whose minutes are in the plan's row already, and 4 still pending. */
  async function organizationWithEndedReservations(month: string): Promise<string> {
    const s = await seedOrganization(ctx);
    const sql = ctx.deps.sql;
    await sql`
      insert into minute_usage (kind, subject_id, month, used_minutes) values ('plan', ${s.org.id}, ${month}, 3100)`;
    await sql`
      insert into minute_reservations (call_id, organization_id, plan_charged, month, reserved_minutes, max_seconds,
        kept_minutes, settled_at, created_at, plan_return_pending)
      select 'call_R' || ${s.org.id.slice(-4)} || lpad(i::text, 21, '0'), ${s.org.id}, true, ${month}, 10, 600,
        1, now(), now(), i <= 4
      from generate_series(1, 3004) i`;
    return s.org.id;
  }

  for (const mode of PLAN_MODES) {
    test(`what ended calls gave back is read from the pending reservations alone (${mode} plan)`, async () => {
      const month = "2026-11-01";
      const org = await organizationWithEndedReservations(month);
      await withPlans(
        ctx,
        async (conn) => {
          const read = conn`select ${planUsedSql(conn, conn`${org}`, month)} as used`;
          expect((await read)[0]).toEqual({ used: 3100 - 4 * 9 });
          const readPlan = await executedPlan(
            conn,
            conn`select ${planUsedSql(conn, conn`${org}`, month)} as used`,
          );
          expectBoundedReads(readPlan, "minute_reservations", 4, "plan used");
          const foldPlan = await executedPlan(conn, foldPlanReturnsSql(conn, [org], month));
          expectBoundedReads(foldPlan, "minute_reservations", 4, "fold");
        },
        mode,
      );
    });
  }
});

describe("a placement's decision, under its organization's locks", () => {
  for (const mode of PLAN_MODES) {
    test(`counts the calls in progress only when its bound leaves no room, by a plain index scan; reads no ended call (${mode} plan)`, async () => {
      const s = await seedOrganization(ctx);
      const sql = ctx.deps.sql;
      const org = s.org.id;
      // 3,000 calls that went through the statuses of a call in progress (each left an entry in the index
      // of calls in progress), two hours ago, and 5 in progress now.
      const insert = (count: number, tag: string, ago: string) => sql`
        insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at, updated_at)
        select 'call_' || ${tag} || lpad(i::text, ${26 - tag.length}, '0'), ${org}, true, 'initiated',
          ${s.agent.id}, '+33612345678', 'outbound', now() - ${ago}::interval - i * interval '1 millisecond',
          now() - ${ago}::interval - i * interval '1 millisecond', now()
        from generate_series(1, ${count}) i`;
      await insert(3_000, `P${org.slice(-4)}`, "2 hours");
      await sql`update calls set status = 'ringing' where organization_id = ${org}`;
      await sql`update calls set status = 'completed' where organization_id = ${org}`;
      await insert(5, `Q${org.slice(-4)}`, "1 minute");
      await sql`insert into call_limits (organization_id, hour_cut, hour_count) values (${org}, now() - interval '1 hour', 0)`;
      // A do-not-call list and contacts of some size, so that reading them whole would show.
      await sql`
        insert into contacts (id, organization_id, phone, created_at, updated_at)
        select 'ct_' || ${org.slice(-4)} || lpad(i::text, 22, '0'), ${org}, '+3361' || lpad(i::text, 7, '0'), now(), now()
        from generate_series(1, 2000) i`;
      await sql`
        insert into blocked_numbers (id, organization_id, livemode, phone, created_at)
        select 'bn_' || ${org.slice(-4)} || lpad(i::text, 22, '0'), ${org}, true, '+3362' || lpad(i::text, 7, '0'), now()
        from generate_series(1, 2000) i`;
      await sql`analyze contacts`;
      await sql`analyze blocked_numbers`;
      const now = new Date();
      const [versions] = await sql<{ organization: string; agent: string }[]>`
        select (select xmin::text from organizations where id = ${org}) as organization,
          (select xmin::text from agents where id = ${s.agent.id}) as agent`;
      const candidate = (c: { scheduled?: string; contactId?: string; stale?: boolean }) => ({
        callId: c.scheduled ?? ctx.deps.ids.next("call"),
        organizationId: org,
        organizationVersion: c.stale ? null : versions!.organization,
        agentId: s.agent.id,
        agentVersion: c.stale ? null : versions!.agent,
        to: "+33612345678",
        canonicalTo: "+33612345678",
        contactId: c.contactId ?? null,
        checkContact: true,
        campaignId: null,
        variables: {},
        scheduled: c.scheduled !== undefined,
        refused: false,
      });
      await withPlans(
        ctx,
        async (conn) => {
          // Each look: a call of a contact that is not the organization's (stale rows, as on a first look),
          // a new call placed, and a task's scheduled call placed.
          const statement = async () => {
            const scheduled = ctx.deps.ids.next("call");
            await conn`
              insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, updated_at)
              values (${scheduled}, ${org}, true, 'scheduled', ${s.agent.id}, '+33612345678', 'outbound', now(), now())`;
            // In an object: a statement is a thenable, which an async function's answer would run.
            return {
              statement: decideSql(conn, {
                candidates: [
                  candidate({ contactId: ctx.deps.ids.next("ct"), stale: true }),
                  candidate({}),
                  candidate({ scheduled }),
                ],
                now,
                hourAgo: new Date(now.getTime() - 3_600_000),
                month: "2026-12-01",
                longestSeconds: 3600,
                timer: { kind: "call.dial", insert: (q, rows) => insertTimersFrom(q, rows) },
              }),
            };
          };
          // The first look counts the calls in progress (the limits row keeps no bound of them yet).
          const placed = await conn<{ p_calls: { status: string }[] }[]>`${(await statement()).statement}`;
          expect(placed[0]!.p_calls.map((c) => c.status)).toEqual(["initiated", "initiated"]);
          // The next, on the bound that look left (5 + 2, room for 3 more under 1,000), counts nothing.
          const onBound = await executedPlan(conn, (await statement()).statement);
          // The counts that ran (the plan holds the count either way).
          const countsOf = (plan: PlanNode) =>
            readsOf(plan, "calls").filter(
              (n) => n["Index Name"] === "calls_live_phone_in_progress" && (n["Actual Loops"] ?? 0) > 0,
            );
          expect(countsOf(onBound), describePlan(onBound)).toEqual([]);
          // The hour and a task's call each read a handful of rows, not the organization's 3,000 ended
          // calls; the contact and the do-not-call list one each.
          expectBoundedReads(onBound, "calls", 10, "decision");
          expectBoundedReads(onBound, "contacts", 1, "decision");
          expectBoundedReads(onBound, "blocked_numbers", 1, "decision");
          // Each candidate's subqueries run once, whatever reads their answers.
          expect(readsOf(onBound, "blocked_numbers"), describePlan(onBound)).toHaveLength(1);
          expect(readsOf(onBound, "contacts"), describePlan(onBound)).toHaveLength(1);
          // With the limit at 10, the bound (9) leaves no room for the batch: the calls in progress are
          // counted, by a plain index scan (an index-only scan never marks the entries of ended calls dead).
          await conn`update organizations set max_concurrent_calls = 10 where id = ${org}`;
          const counted = await executedPlan(conn, (await statement()).statement);
          expect(countsOf(counted).length, describePlan(counted)).toBeGreaterThan(0);
          for (const n of countsOf(counted)) {
            expect(n["Node Type"], describePlan(counted)).toBe("Index Scan");
            expect(n["Actual Rows"], describePlan(counted)).toBe(9);
          }
          expectBoundedReads(counted, "calls", 12, "decision");
        },
        mode,
      );
    });
  }
});
