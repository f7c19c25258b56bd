import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { registerTimerHandlers } from "../../src/timerHandlers.ts";
import { TimerRunner } from "../../src/timers/runner.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { waitUntil } from "../helpers/wait.ts";
import { campaignEvents, checkProgress, createCampaign, phones } from "./support.ts";

/**
 * The engine keeps nothing in memory: a campaign created while no runner runs, played by a runner
 * that is then stopped half-way and by another one started later, still completes, each contact
 * called once and each event once.
 */

const SCALE = 0.005;
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const runners: TimerRunner[] = [];

beforeAll(async () => {
  ctx = await createTestContext({ env: { SIMULATION_TIME_SCALE: String(SCALE) } });
  seed = await seedOrganization(ctx, { paidPlan: false });
});
afterAll(async () => {
  for (const r of runners) await r.stop();
  await ctx.close();
});

function startRunner() {
  const runner = new TimerRunner({
    sql: ctx.deps.sql,
    log: ctx.deps.log,
    liveness: ctx.db.kind === "embedded" ? "shared" : "own",
    pollIntervalMs: 50,
    horizonMs: 500,
  });
  runners.push(runner);
  registerTimerHandlers(runner, { ...ctx.deps, timers: runner });
  return runner.start().then(() => runner);
}

const progress = async (id: string) =>
  (await ctx.request(`/api/v1/campaigns/${id}`, { key: seed.testKey })).json();

describe("campaign engine across runners", () => {
  test("created without a runner, stopped half-way, resumed by another runner: completes once", async () => {
    const created = await (
      await createCampaign(ctx, seed.testKey, {
        name: "Durable",
        agentId: seed.agent.id,
        contacts: phones(8),
        concurrency: 2,
      })
    ).json();
    expect(created.progress).toMatchObject({ pending: 6, inProgress: 2 });
    // Let the first calls' timers become overdue while nothing runs.
    await Bun.sleep(100);

    const first = await startRunner();
    await waitUntil(
      "two calls of the campaign to complete",
      async () => (await progress(created.id)).progress.completed >= 2,
      { timeoutMs: 15_000 },
    );
    await first.stop();
    const halfway = await progress(created.id);
    expect(halfway.status).toBe("running");
    checkProgress(halfway.progress, 2);

    await Bun.sleep(100);
    await startRunner();
    let campaign = halfway;
    await waitUntil(
      "the campaign to complete",
      async () => {
        campaign = await progress(created.id);
        checkProgress(campaign.progress, 2);
        return campaign.status === "completed";
      },
      { timeoutMs: 15_000 },
    );
    expect(campaign.progress).toMatchObject({
      total: 8,
      completed: 8,
      succeeded: 8,
      pending: 0,
      inProgress: 0,
    });
    const calls = await ctx.deps.sql<{ to_number: string }[]>`
      select to_number from calls where campaign_id = ${created.id}`;
    expect(calls).toHaveLength(8);
    expect(new Set(calls.map((c) => c.to_number)).size).toBe(8);
    expect((await campaignEvents(ctx.deps.sql, created.id)).map((e) => e.type)).toEqual([
      "campaign.started",
      "campaign.completed",
    ]);
  });
});
