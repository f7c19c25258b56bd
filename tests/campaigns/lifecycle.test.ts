import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createContact } from "../../src/services/contacts.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  CAMPAIGN_KEYS,
  campaignEvents,
  checkMonotonic,
  checkProgress,
  createCampaign,
  openCalls,
  type Progress,
  phones,
} from "./support.ts";

/** A simulated call lasts (5 + 30..89) s × SCALE: 0.18 to 0.47 s here. */
const SCALE = 0.005;
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext({ timers: true, env: { SIMULATION_TIME_SCALE: String(SCALE) } });
  seed = await seedOrganization(ctx, { paidPlan: false });
});
afterAll(() => ctx.close());

describe("test campaign lifecycle", () => {
  test("201 running, then every contact called with at most `concurrency` calls at once, then completed once", async () => {
    const concurrency = 3;
    const res = await createCampaign(ctx, seed.testKey, {
      name: "November reminders",
      agentId: seed.agent.id,
      contacts: [
        ...phones(9),
        { phone: "+33699999999", name: "Jeanne Martin", variables: { firstName: "Jeanne" } },
      ],
      concurrency,
    });
    expect(res.status).toBe(201);
    const created = await res.json();
    expect(Object.keys(created).sort()).toEqual(CAMPAIGN_KEYS);
    expect(created).toMatchObject({
      livemode: false,
      name: "November reminders",
      agentId: seed.agent.id,
      status: "running",
      concurrency,
      maxAttempts: 2,
      completedAt: null,
      progress: { total: 10, pending: 7, inProgress: 3, completed: 0, succeeded: 0, failed: 0, cancelled: 0 },
    });
    expect(created.id).toMatch(/^cmp_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(created.startedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    // Sample while it runs: the API's counters and the calls table agree with the invariants.
    let last: Progress = created.progress;
    let samples = 0;
    let campaign = created;
    await waitUntil(
      "the campaign to complete",
      async () => {
        const [r, open] = await Promise.all([
          ctx.request(`/api/v1/campaigns/${created.id}`, { key: seed.testKey }),
          openCalls(ctx.deps.sql, created.id),
        ]);
        expect(r.status).toBe(200);
        campaign = await r.json();
        checkProgress(campaign.progress, concurrency);
        checkMonotonic(last, campaign.progress);
        expect(open).toBeLessThanOrEqual(concurrency);
        last = campaign.progress;
        samples++;
        return campaign.status === "completed";
      },
      { timeoutMs: 20_000 },
    );
    expect(samples).toBeGreaterThan(3);
    expect(campaign.progress).toEqual({
      total: 10,
      pending: 0,
      inProgress: 0,
      completed: 10,
      succeeded: 10,
      failed: 0,
      cancelled: 0,
    });
    expect(campaign.completedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(campaign.completedAt)).toBeGreaterThanOrEqual(Date.parse(campaign.startedAt));

    // Each contact is one simulated call of the campaign, answered, with its number and variables.
    const calls = await ctx.deps.sql<
      {
        to_number: string;
        status: string;
        outcome: string;
        livemode: boolean;
        variables: Record<string, unknown>;
      }[]
    >`select to_number, status, outcome, livemode, variables from calls where campaign_id = ${created.id}`;
    expect(calls).toHaveLength(10);
    expect(new Set(calls.map((c) => c.to_number)).size).toBe(10);
    expect(
      calls.every((c) => c.status === "completed" && c.outcome === "answered_human" && !c.livemode),
    ).toBe(true);
    expect(calls.find((c) => c.to_number === "+33699999999")!.variables).toEqual({ firstName: "Jeanne" });

    // Listed through the calls list filter too.
    const listed = await (
      await ctx.request(`/api/v1/calls?campaignId=${created.id}&limit=100`, { key: seed.testKey })
    ).json();
    expect(listed.data).toHaveLength(10);

    // Events: started once, completed once, with the campaign as data and livemode false.
    await Bun.sleep(100);
    const events = await campaignEvents(ctx.deps.sql, created.id);
    expect(events.map((e) => e.type)).toEqual(["campaign.started", "campaign.completed"]);
    expect(events.every((e) => e.livemode === false)).toBe(true);
    expect(events[0]!.data).toMatchObject({ id: created.id, status: "running" });
    expect(events[1]!.data).toMatchObject({
      id: created.id,
      status: "completed",
      progress: { succeeded: 10 },
    });

    // Cancelling a completed campaign answers it unchanged, with no event.
    const cancel = await ctx.request(`/api/v1/campaigns/${created.id}/cancel`, {
      method: "POST",
      key: seed.testKey,
    });
    expect(cancel.status).toBe(200);
    expect(await cancel.json()).toEqual(campaign);
    expect(await campaignEvents(ctx.deps.sql, created.id)).toHaveLength(2);
  });

  test("contactIds: the organization's contacts are called with their numbers, in order", async () => {
    const c = ctx.deps;
    const actor = { organizationId: seed.org.id, livemode: false };
    const a = await createContact(c, actor, { phone: "+33611111111", name: "Ana" });
    const b = await createContact(c, actor, { phone: "+33622222222" });
    // The timers wait while the first call is looked at (at this scale it could end, and the second
    // start, before a slow process gets there).
    await ctx.runner!.stop();
    let created: { id: string };
    try {
      const res = await createCampaign(ctx, seed.testKey, {
        name: "Known contacts",
        agentId: seed.agent.id,
        contactIds: [a.id, b.id],
        concurrency: 1,
        maxAttempts: 5,
      });
      expect(res.status).toBe(201);
      created = await res.json();
      expect(created).toMatchObject({
        concurrency: 1,
        maxAttempts: 5,
        progress: { total: 2, pending: 1, inProgress: 1 },
      });
      const first = await ctx.deps.sql<{ contact_id: string; to_number: string }[]>`
        select contact_id, to_number from calls where campaign_id = ${created.id}`;
      expect([...first]).toEqual([{ contact_id: a.id, to_number: "+33611111111" }]);
    } finally {
      await ctx.runner!.start();
    }

    await waitUntil(
      "the campaign to complete",
      async () => {
        const r = await ctx.request(`/api/v1/campaigns/${created.id}`, { key: seed.testKey });
        const body = await r.json();
        checkProgress(body.progress, 1);
        expect(await openCalls(ctx.deps.sql, created.id)).toBeLessThanOrEqual(1);
        return body.status === "completed";
      },
      { timeoutMs: 15_000 },
    );
    const calls = await ctx.deps.sql<{ contact_id: string; to_number: string }[]>`
      select contact_id, to_number from calls where campaign_id = ${created.id} order by id`;
    expect([...calls]).toEqual([
      { contact_id: a.id, to_number: "+33611111111" },
      { contact_id: b.id, to_number: "+33622222222" },
    ]);
  });
});
