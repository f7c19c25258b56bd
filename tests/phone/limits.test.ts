import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { ManualClock } from "../../src/clock.ts";
import { composeDeps } from "../../src/compose.ts";
import { silentLogger } from "../../src/log.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { startServer } from "../calls/process.ts";
import { depsFor, seedOrganization } from "../helpers/app.ts";
import { outcomeOf } from "../helpers/errors.ts";
import {
  freshNumber,
  type PhoneWorld,
  placeCall,
  type SharedPostgres,
  seedPhoneOrganization,
  startPhoneWorld,
  startSharedPostgres,
  TRUNK,
  tally,
} from "./support.ts";

/**
 * The organization's limits of live phone calls are exact under concurrent requests, in one process
 * and across two (two pools on one PostgreSQL): the check and the placement are one critical section.
 */

let w: PhoneWorld;
beforeAll(async () => {
  w = await startPhoneWorld();
});
afterAll(() => w.close());

async function inProgress(organizationId: string): Promise<number> {
  const [row] = await w.ctx.deps.sql<{ n: number }[]>`
    select count(*)::int as n from calls where organization_id = ${organizationId} and livemode
      and status in ('initiated', 'ringing', 'ongoing')`;
  return row!.n;
}

describe("20 parallel requests", () => {
  test("maxConcurrentCalls 5: exactly 5 placed, 15 refused 429 concurrency_limit_reached with Retry-After", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 5, maxCallsPerHour: 1000 });
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() }),
      ),
    );
    expect(tally(await Promise.all(answers.map(outcomeOf)))).toEqual({
      "201 ok": 5,
      "429 concurrency_limit_reached": 15,
    });
    for (const r of answers.filter((a) => a.status === 429)) {
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    expect(await inProgress(seed.org.id)).toBe(5);
  });

  test("calls that end make room at once: the placements' bound of calls in progress is counted again when it leaves none", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 5, maxCallsPerHour: 1000 });
    const place = async (n: number) =>
      tally(
        await Promise.all(
          Array.from({ length: n }, async () =>
            outcomeOf(await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() })),
          ),
        ),
      );
    const bound = async () =>
      (
        await w.ctx.deps.sql<{ b: number | null }[]>`
          select in_progress_bound as b from call_limits where organization_id = ${seed.org.id}`
      )[0]!.b;
    // Three placed one by one: the first counts (no bound yet), the next two are admitted on the bound.
    for (let i = 0; i < 3; i++) expect(await place(1)).toEqual({ "201 ok": 1 });
    expect(await bound()).toBe(3);
    // Two of them end (as a callee hanging up would): the bound still says 3, the truth is 1.
    await w.ctx.deps.sql`
      update calls set status = 'completed' where id in (
        select id from calls where organization_id = ${seed.org.id} order by id limit 2)`;
    // Room for 4: the bound (3) leaves room for 2 only, so the calls in progress are counted again.
    expect(await place(6)).toEqual({ "201 ok": 4, "429 concurrency_limit_reached": 2 });
    expect(await inProgress(seed.org.id)).toBe(5);
    expect(await bound()).toBe(5);
  });

  test("maxCallsPerHour 7: exactly 7 placed, 13 refused 429 hourly_limit_reached, Retry-After about an hour", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 1000, maxCallsPerHour: 7 });
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() }),
      ),
    );
    expect(tally(await Promise.all(answers.map(outcomeOf)))).toEqual({
      "201 ok": 7,
      "429 hourly_limit_reached": 13,
    });
    for (const r of answers.filter((a) => a.status === 429)) {
      const retry = Number(r.headers.get("retry-after"));
      expect(retry).toBeGreaterThan(3500);
      expect(retry).toBeLessThanOrEqual(3600);
    }
    const [limits] = await w.ctx.deps
      .sql`select hour_count from call_limits where organization_id = ${seed.org.id}`;
    expect(limits!.hour_count).toBe(7);
  });

  test("web calls and test calls count in neither limit", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 1, maxCallsPerHour: 1 });
    // A live web call in progress and a simulated phone call.
    await w.ctx.deps.sql`
      insert into calls (id, organization_id, livemode, status, agent_id, direction, created_at, updated_at)
      values (${w.ctx.deps.ids.next("call")}, ${seed.org.id}, true, 'ongoing', ${seed.agent.id}, 'web', now(), now())`;
    expect((await placeCall(w.ctx, seed.testKey, { agentId: seed.agent.id, to: freshNumber() })).status).toBe(
      201,
    );
    expect(
      await outcomeOf(await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() })),
    ).toBe("201 ok");
  });
});

describe("the rolling hour", () => {
  test("counts the last 60 minutes exactly: a placement leaves it 60 minutes after it was made", async () => {
    const clock = new ManualClock("2026-11-23T09:00:00.000Z");
    const timed = await startPhoneWorld({ clock });
    try {
      const seed = await seedPhoneOrganization(timed.ctx, { maxCallsPerHour: 3, maxConcurrentCalls: 100 });
      const call = () => placeCall(timed.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() });
      for (let i = 0; i < 3; i++) {
        expect(await outcomeOf(await call())).toBe("201 ok");
        clock.advance(10 * 60_000);
      }
      // 09:30: three placed at 09:00, 09:10, 09:20. The 09:00 one leaves at 10:00.
      const full = await call();
      expect(await outcomeOf(full)).toBe("429 hourly_limit_reached");
      expect(full.headers.get("retry-after")).toBe(String(30 * 60));
      clock.set("2026-11-23T09:59:59.999Z");
      expect(await outcomeOf(await call())).toBe("429 hourly_limit_reached");
      // At 10:00 the 09:00 placement is 60 minutes old: out of the last 60 minutes, as Retry-After said.
      clock.set("2026-11-23T10:00:00.000Z");
      expect(await outcomeOf(await call())).toBe("201 ok");
      const next = await call();
      expect(await outcomeOf(next)).toBe("429 hourly_limit_reached");
      expect(next.headers.get("retry-after")).toBe(String(10 * 60)); // 09:10 leaves at 10:10
      // Hours later everything has left, in one step.
      clock.set("2026-11-23T15:00:00.000Z");
      for (let i = 0; i < 3; i++) expect(await outcomeOf(await call())).toBe("201 ok");
      expect(await outcomeOf(await call())).toBe("429 hourly_limit_reached");
      const [limits] = await timed.ctx.deps.sql`
        select hour_count, hour_cut from call_limits where organization_id = ${seed.org.id}`;
      expect(limits).toEqual({ hour_count: 3, hour_cut: new Date("2026-11-23T14:00:00.000Z") });
    } finally {
      await timed.close();
    }
  });
});

describe("two processes on one PostgreSQL", () => {
  let shared: SharedPostgres;
  beforeAll(async () => {
    shared = await startSharedPostgres();
  });
  afterAll(() => shared.close());

  test("20 requests over two apps with their own pools: the limits hold exactly", async () => {
    const { env, db } = shared;
    const pools = [shared.pool(), shared.pool()];
    const apps = pools
      .map((sql) => ({ deps: composeDeps({ sql, env, log: silentLogger }) }))
      .map((c) => ({
        ...c,
        app: createApp(c.deps),
      }));
    const ctx = {
      deps: apps[0]!.deps,
      request: (i: number, path: string, init: { key: string; json: unknown }) =>
        apps[i % 2]!.app.fetch(
          new Request(`http://localhost${path}`, {
            method: "POST",
            headers: { authorization: `Bearer ${init.key}`, "content-type": "application/json" },
            body: JSON.stringify(init.json),
          }),
          { remoteAddress: "127.0.0.1" },
        ),
    };
    for (const [limits, expected] of [
      [
        { maxConcurrentCalls: 6, maxCallsPerHour: 1000 },
        { "201 ok": 6, "429 concurrency_limit_reached": 14 },
      ],
      [
        { maxConcurrentCalls: 1000, maxCallsPerHour: 9 },
        { "201 ok": 9, "429 hourly_limit_reached": 11 },
      ],
    ] as const) {
      const seed = await seedOrganization(ctx, { paidPlan: true, planMinutes: 10_000 });
      await updateOrganization(ctx.deps, seed.org.id, limits);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          ctx.request(i, "/api/v1/calls", {
            key: seed.liveKey,
            json: { agentId: seed.agent.id, to: freshNumber() },
          }),
        ),
      );
      expect(tally(await Promise.all(answers.map(outcomeOf)))).toEqual(expected);
      const [row] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from calls where organization_id = ${seed.org.id} and livemode`;
      expect(row!.n).toBe(expected["201 ok"]);
    }
  });

  test("20 parallel requests over two server processes: the limits hold exactly", async () => {
    const { db, liveKit } = shared;
    const env = { DATABASE_URL: db.url!, ...liveKit.env, LIVEKIT_SIP_TRUNK_ID: TRUNK };
    const servers = await Promise.all([startServer(env), startServer(env)]);
    try {
      const deps = depsFor(db.sql);
      for (const [limits, expected] of [
        [
          { maxConcurrentCalls: 6, maxCallsPerHour: 1000 },
          { "201 ok": 6, "429 concurrency_limit_reached": 14 },
        ],
        [
          { maxConcurrentCalls: 1000, maxCallsPerHour: 9 },
          { "201 ok": 9, "429 hourly_limit_reached": 11 },
        ],
      ] as const) {
        const seed = await seedOrganization({ deps }, { paidPlan: true, planMinutes: 10_000 });
        await updateOrganization(deps, seed.org.id, limits);
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            fetch(`${servers[i % 2]!.url}/api/v1/calls`, {
              method: "POST",
              headers: { authorization: `Bearer ${seed.liveKey}`, "content-type": "application/json" },
              body: JSON.stringify({ agentId: seed.agent.id, to: freshNumber() }),
            }),
          ),
        );
        expect(tally(await Promise.all(answers.map(outcomeOf)))).toEqual(expected);
        const [row] = await db.sql<{ n: number }[]>`
          select count(*)::int as n from calls where organization_id = ${seed.org.id} and livemode`;
        expect(row!.n).toBe(expected["201 ok"]);
      }
    } finally {
      for (const server of servers) server.proc.kill("SIGTERM");
      await Promise.all(servers.map((server) => server.exited));
    }
  }, 90_000);
});
