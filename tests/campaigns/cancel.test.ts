import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
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

const SCALE = 0.005;
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext({ timers: true, env: { SIMULATION_TIME_SCALE: String(SCALE) } });
  seed = await seedOrganization(ctx, { paidPlan: false });
});
afterAll(() => ctx.close());

/**
 * Runs `fn` with the timers held (at this scale a call ends 175 ms after it starts, and the next one
 * starts: what `fn` looks at must not depend on how quickly this process gets there), then lets them go.
 */
async function timersHeld<T>(fn: () => Promise<T>): Promise<T> {
  await ctx.runner!.stop();
  try {
    return await fn();
  } finally {
    await ctx.runner!.start();
  }
}

const cancel = (id: string, key = seed.testKey) =>
  ctx.request(`/api/v1/campaigns/${id}/cancel`, { method: "POST", key });

describe("cancelling a campaign", () => {
  test("pending contacts are never called, calls in progress finish and count, campaign.cancelled once", async () => {
    const { created, cancelled } = await timersHeld(async () => {
      const created = await (
        await createCampaign(ctx, seed.testKey, {
          name: "Stop me",
          agentId: seed.agent.id,
          contacts: phones(10),
          concurrency: 2,
        })
      ).json();
      expect(created.progress).toMatchObject({ pending: 8, inProgress: 2 });

      const res = await cancel(created.id);
      expect(res.status).toBe(200);
      const cancelled = await res.json();
      expect(cancelled).toMatchObject({
        id: created.id,
        status: "cancelled",
        completedAt: null,
        progress: {
          total: 10,
          pending: 0,
          inProgress: 2,
          completed: 0,
          succeeded: 0,
          failed: 0,
          cancelled: 8,
        },
      });
      return { created, cancelled };
    });

    // The two calls in progress finish and are counted; nothing else is ever called.
    let last: Progress = cancelled.progress;
    let campaign = cancelled;
    await waitUntil(
      "the calls in progress to finish",
      async () => {
        campaign = await (await ctx.request(`/api/v1/campaigns/${created.id}`, { key: seed.testKey })).json();
        checkProgress(campaign.progress, 2);
        checkMonotonic(last, campaign.progress);
        last = campaign.progress;
        return campaign.progress.inProgress === 0;
      },
      { timeoutMs: 15_000 },
    );
    expect(campaign).toMatchObject({
      status: "cancelled",
      completedAt: null,
      progress: { total: 10, pending: 0, inProgress: 0, completed: 2, succeeded: 2, failed: 0, cancelled: 8 },
    });
    await Bun.sleep(300);
    const [{ n }] = (await ctx.deps.sql`
      select count(*)::int as n from calls where campaign_id = ${created.id}`) as unknown as [{ n: number }];
    expect(n).toBe(2);
    expect(await openCalls(ctx.deps.sql, created.id)).toBe(0);

    // Cancelling again: the campaign as it is, no second event.
    const again = await cancel(created.id);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(campaign);
    const events = await campaignEvents(ctx.deps.sql, created.id);
    expect(events.map((e) => e.type)).toEqual(["campaign.started", "campaign.cancelled"]);
    expect(events[1]).toMatchObject({ livemode: false, data: { id: created.id, status: "cancelled" } });
  });

  test("20 parallel cancels: one event, every answer cancelled", async () => {
    const created = await timersHeld(async () => {
      const created = await (
        await createCampaign(ctx, seed.testKey, {
          name: "Race",
          agentId: seed.agent.id,
          contacts: phones(5),
          concurrency: 1,
        })
      ).json();
      const answers = await Promise.all(Array.from({ length: 20 }, () => cancel(created.id)));
      expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
      const bodies = await Promise.all(answers.map((r) => r.json()));
      expect(bodies.every((b) => b.status === "cancelled" && b.progress.cancelled === 4)).toBe(true);
      return created;
    });
    const events = await campaignEvents(ctx.deps.sql, created.id);
    expect(events.filter((e) => e.type === "campaign.cancelled")).toHaveLength(1);
  });

  test("a live key cannot cancel a test campaign (404), nor an unknown or malformed id", async () => {
    const created = await (
      await createCampaign(ctx, seed.testKey, { name: "Mine", agentId: seed.agent.id, contacts: phones(1) })
    ).json();
    for (const [id, key] of [
      [created.id, seed.liveKey],
      ["cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", seed.testKey],
      ["nope", seed.testKey],
      [created.id.replace("cmp_", "call_"), seed.testKey],
    ] as const) {
      const res = await cancel(id, key);
      await expectApiError(res, 404, "not_found");
    }
    const still = await (await ctx.request(`/api/v1/campaigns/${created.id}`, { key: seed.testKey })).json();
    expect(still.status).not.toBe("cancelled");
  });
});
