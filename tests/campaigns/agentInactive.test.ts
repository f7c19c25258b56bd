import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  campaignEvents,
  checkMonotonic,
  checkProgress,
  createCampaign,
  openCalls,
  type Progress,
  phones,
} from "./support.ts";

/**
 * A test campaign runs like a live one: once its agent is inactive, the contacts not yet
 * called fail with `agent_unavailable` as their call's outcome, the calls in progress finish, and the
 * campaign completes.
 */

const ADMIN_TOKEN = "adm_test_token_0123456789abcdefghijklmnopqrstuvwxyz";
/** A simulated call lasts (5 + 30..89) s × SCALE: 0.7 to 1.9 s here, long past the deactivation. */
const SCALE = 0.02;
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext({ timers: true, env: { ADMIN_TOKEN, SIMULATION_TIME_SCALE: String(SCALE) } });
  seed = await seedOrganization(ctx, { paidPlan: false });
});
afterAll(() => ctx.close());

describe("a test campaign whose agent becomes inactive", () => {
  test("the contacts not yet called fail with agent_unavailable, calls in progress finish, it completes", async () => {
    const concurrency = 2;
    const created = await (
      await createCampaign(ctx, seed.testKey, {
        name: "Deactivated",
        agentId: seed.agent.id,
        contacts: phones(20),
        concurrency,
      })
    ).json();
    expect(created.progress).toMatchObject({ total: 20, pending: 18, inProgress: 2 });

    const patched = await ctx.request(`/api/admin/v1/agents/${seed.agent.id}`, {
      method: "PATCH",
      key: ADMIN_TOKEN,
      json: { active: false },
    });
    expect(patched.status).toBe(200);
    expect((await patched.json()).active).toBe(false);
    const deactivatedAt = new Date();
    const before = await ctx.deps.sql<{ id: string }[]>`
      select id from calls where campaign_id = ${created.id}`;
    expect(before).toHaveLength(2);

    let last: Progress = created.progress;
    let campaign = created;
    await waitUntil(
      "the campaign to complete",
      async () => {
        const [r, open] = await Promise.all([
          ctx.request(`/api/v1/campaigns/${created.id}`, { key: seed.testKey }),
          openCalls(ctx.deps.sql, created.id),
        ]);
        campaign = await r.json();
        checkProgress(campaign.progress, concurrency);
        checkMonotonic(last, campaign.progress);
        expect(open).toBeLessThanOrEqual(concurrency);
        last = campaign.progress;
        return campaign.status === "completed";
      },
      { timeoutMs: 20_000 },
    );
    expect(campaign.progress).toEqual({
      total: 20,
      pending: 0,
      inProgress: 0,
      completed: 20,
      succeeded: 2,
      failed: 18,
      cancelled: 0,
    });

    // The two calls in progress finished; every other contact has a call of its own, never placed,
    // failed with agent_unavailable, in test mode, written after the deactivation.
    const calls = await ctx.deps.sql<
      {
        id: string;
        status: string;
        outcome: string | null;
        livemode: boolean;
        created_at: Date;
        ended_at: Date | null;
      }[]
    >`select id, status, outcome, livemode, created_at, ended_at from calls where campaign_id = ${created.id}
      order by id`;
    expect(calls).toHaveLength(20);
    const started = calls.filter((c) => before.some((b) => b.id === c.id));
    expect(started.map((c) => `${c.status} ${c.outcome}`)).toEqual([
      "completed answered_human",
      "completed answered_human",
    ]);
    const refused = calls.filter((c) => !before.some((b) => b.id === c.id));
    expect(refused).toHaveLength(18);
    for (const c of refused) {
      expect(c).toMatchObject({ status: "failed", outcome: "agent_unavailable", livemode: false });
      expect(c.created_at.getTime()).toBeGreaterThanOrEqual(deactivatedAt.getTime() - 1_000);
      expect(c.ended_at).toEqual(c.created_at);
    }

    // Each refused call has its call.ended (test mode), readable with the test key; the campaign's
    // events are started then completed, once each, in test mode.
    const ended = await ctx.deps.sql<{ livemode: boolean; data: { id: string; outcome: string } }[]>`
      select livemode, data from events where type = 'call.ended' and data->>'campaignId' = ${created.id}`;
    for (const c of refused) {
      const event = ended.find((e) => e.data.id === c.id);
      expect(event).toMatchObject({ livemode: false, data: { outcome: "agent_unavailable" } });
    }
    const read = await ctx.request(`/api/v1/calls/${refused[0]!.id}`, { key: seed.testKey });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({
      status: "failed",
      outcome: "agent_unavailable",
      livemode: false,
    });
    const events = await campaignEvents(ctx.deps.sql, created.id);
    expect(events.map((e) => e.type)).toEqual(["campaign.started", "campaign.completed"]);
    expect(events.every((e) => e.livemode === false)).toBe(true);
    expect(events[1]!.data).toMatchObject({ status: "completed", progress: { succeeded: 2, failed: 18 } });
  });
});
