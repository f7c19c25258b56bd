import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAgent } from "../../src/services/agents.ts";
import { createContact } from "../../src/services/contacts.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { createCampaign, phones } from "./support.ts";

/** Refusals of the campaign routes; no timer runner, so created campaigns stay where creation left them. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let unpaid: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx, { paidPlan: true });
  unpaid = await seedOrganization(ctx, { paidPlan: false });
});
afterAll(() => ctx.close());

async function counts() {
  const [row] = (await ctx.deps.sql`select
    (select count(*)::int from campaigns) as campaigns,
    (select count(*)::int from campaign_contacts) as contacts,
    (select count(*)::int from calls) as calls,
    (select count(*)::int from timers) as timers,
    (select count(*)::int from events) as events`) as unknown as [Record<string, number>];
  return row;
}

const valid = () => ({ name: "Reminders", agentId: seed.agent.id, contacts: phones(2) });

describe("POST /v1/campaigns: bad bodies", () => {
  test("each bad body is 400 invalid_request with its param, and writes nothing", async () => {
    const before = await counts();
    const cases: [Record<string, unknown>, string][] = [
      [{ ...valid(), contacts: undefined }, "contacts"],
      [{ ...valid(), contactIds: ["ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"] }, "contactIds"],
      [{ ...valid(), contacts: [] }, "contacts"],
      [{ ...valid(), concurrency: 0 }, "concurrency"],
      [{ ...valid(), concurrency: 21 }, "concurrency"],
      [{ ...valid(), concurrency: 2.5 }, "concurrency"],
      [{ ...valid(), maxAttempts: 0 }, "maxAttempts"],
      [{ ...valid(), maxAttempts: 6 }, "maxAttempts"],
      [{ ...valid(), contacts: [{ phone: "0612345678" }] }, "contacts.0.phone"],
      [{ ...valid(), contacts: [{ phone: "+33612345678" }, { phone: "+33 6 12" }] }, "contacts.1.phone"],
      [{ ...valid(), contacts: [{ phone: "+33612345678", extra: 1 }] }, "contacts.0.extra"],
      [
        { ...valid(), contacts: [{ phone: "+33612345678", variables: { a: { b: 1 } } }] },
        "contacts.0.variables.a",
      ],
      [{ ...valid(), name: "" }, "name"],
      [{ ...valid(), name: undefined }, "name"],
      [{ ...valid(), agentId: 42 }, "agentId"],
      [{ ...valid(), colour: "blue" }, "colour"],
      [{ name: "x", agentId: seed.agent.id, contactIds: ["a", "a"] }, "contactIds"],
    ];
    for (const [json, param] of cases) {
      const res = await createCampaign(ctx, seed.testKey, json);
      await expectApiError(res, 400, "invalid_request", { param });
    }
    expect(await counts()).toEqual(before);
  });

  test("101 contacts with a test key: 400 test_campaign_too_large; 100 is accepted", async () => {
    const before = await counts();
    const res = await createCampaign(ctx, seed.testKey, { ...valid(), contacts: phones(101) });
    const body = await expectApiError(res, 400, "test_campaign_too_large", { param: "contacts" });
    expect(body.error.message).toContain("100");
    expect(await counts()).toEqual(before);
    const ok = await createCampaign(ctx, seed.testKey, {
      ...valid(),
      contacts: phones(100),
      concurrency: 20,
    });
    expect(ok.status).toBe(201);
    expect((await ok.json()).progress).toMatchObject({ total: 100, pending: 80, inProgress: 20 });
  });

  test("unknown, malformed or foreign ids in the body: 404 not_found with param", async () => {
    const other = await seedOrganization(ctx);
    const foreign = await createContact(
      ctx.deps,
      { organizationId: other.org.id, livemode: false },
      { phone: "+33611111111" },
    );
    const mine = await createContact(
      ctx.deps,
      { organizationId: seed.org.id, livemode: false },
      { phone: "+33622222222" },
    );
    const before = await counts();
    const cases: [Record<string, unknown>, string][] = [
      [{ ...valid(), agentId: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }, "agentId"],
      [{ ...valid(), agentId: "nope" }, "agentId"],
      [{ ...valid(), agentId: other.agent.id }, "agentId"],
      [
        { name: "x", agentId: seed.agent.id, contactIds: [mine.id, "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"] },
        "contactIds.1",
      ],
      [{ name: "x", agentId: seed.agent.id, contactIds: [foreign.id] }, "contactIds.0"],
      [{ name: "x", agentId: seed.agent.id, contactIds: ["garbage"] }, "contactIds.0"],
    ];
    for (const [json, param] of cases) {
      await expectApiError(await createCampaign(ctx, seed.testKey, json), 404, "not_found", { param });
      // The live key looks the ids up first as well.
      await expectApiError(await createCampaign(ctx, seed.liveKey, json), 404, "not_found", { param });
    }
    expect(await counts()).toEqual(before);
  });
});

describe("POST /v1/campaigns: keys, plan, carrier, agent", () => {
  test("live key: no paid plan 403 plan_required, no minutes 403 plan_minutes_exhausted, else 503 carrier_unavailable; nothing written", async () => {
    const before = await counts();
    await expectApiError(
      await createCampaign(ctx, unpaid.liveKey, { ...valid(), agentId: unpaid.agent.id }),
      403,
      "plan_required",
    );
    const noMinutes = await seedOrganization(ctx, { paidPlan: true, planMinutes: 0 });
    await expectApiError(
      await createCampaign(ctx, noMinutes.liveKey, { ...valid(), agentId: noMinutes.agent.id }),
      403,
      "plan_minutes_exhausted",
    );
    await expectApiError(await createCampaign(ctx, seed.liveKey, valid()), 503, "carrier_unavailable");
    // No test-size limit applies to live campaigns: the carrier is what is missing.
    await expectApiError(
      await createCampaign(ctx, seed.liveKey, { ...valid(), contacts: phones(150) }),
      503,
      "carrier_unavailable",
    );
    expect(await counts()).toEqual(before);
  });

  test("a test key needs no plan", async () => {
    const res = await createCampaign(ctx, unpaid.testKey, { ...valid(), agentId: unpaid.agent.id });
    expect(res.status).toBe(201);
    expect((await res.json()).livemode).toBe(false);
  });

  test("scopes, agent restriction, inactive agent", async () => {
    const c = ctx.deps;
    const readOnly = await createSecretKey(c, seed.org.id, { mode: "test", scopes: ["campaigns:read"] });
    await expectApiError(await createCampaign(ctx, readOnly.key, valid()), 403, "missing_scope");
    const writeOnly = await createSecretKey(c, seed.org.id, { mode: "test", scopes: ["campaigns:write"] });
    await expectApiError(
      await ctx.request("/api/v1/campaigns", { key: writeOnly.key }),
      403,
      "missing_scope",
    );
    await expectApiError(await ctx.request("/api/v1/campaigns", {}), 401, "invalid_key");

    const otherAgent = await createAgent(c, seed.org.id, { name: "Sales" });
    const restricted = await createSecretKey(c, seed.org.id, {
      mode: "test",
      scopes: ["*"],
      agentIds: [otherAgent.id],
    });
    await expectApiError(await createCampaign(ctx, restricted.key, valid()), 403, "agent_not_allowed", {
      param: "agentId",
    });

    const sleeping = await createAgent(c, seed.org.id, { name: "Off", active: false });
    await expectApiError(
      await createCampaign(ctx, seed.testKey, { ...valid(), agentId: sleeping.id }),
      503,
      "agent_unavailable",
      { param: "agentId" },
    );

    // A campaign of an agent the key may not use is invisible to it.
    const mine = await (await createCampaign(ctx, seed.testKey, valid())).json();
    await expectApiError(
      await ctx.request(`/api/v1/campaigns/${mine.id}`, { key: restricted.key }),
      404,
      "not_found",
    );
    const listed = await (await ctx.request("/api/v1/campaigns", { key: restricted.key })).json();
    expect(listed.data.map((x: { id: string }) => x.id)).not.toContain(mine.id);
  });
});

describe("reads: mode isolation and the list convention", () => {
  test("a test campaign is invisible to the live key, and the other way round", async () => {
    const created = await (await createCampaign(ctx, seed.testKey, valid())).json();
    await expectApiError(
      await ctx.request(`/api/v1/campaigns/${created.id}`, { key: seed.liveKey }),
      404,
      "not_found",
    );
    // A live campaign row (as a future carrier would create) is invisible to the test key.
    await ctx.deps.sql`
      insert into campaigns (id, organization_id, livemode, name, agent_id, status, concurrency, max_attempts,
        total, pending, in_progress, created_at, started_at, updated_at)
      values ('cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0D', ${seed.org.id}, true, 'Real', ${seed.agent.id}, 'running', 5, 2,
        1, 1, 0, now(), now(), now())`;
    await expectApiError(
      await ctx.request("/api/v1/campaigns/cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0D", { key: seed.testKey }),
      404,
      "not_found",
    );
    await expectApiError(
      await ctx.request("/api/v1/campaigns/cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0D/cancel", {
        method: "POST",
        key: seed.testKey,
      }),
      404,
      "not_found",
    );
    const live = await (await ctx.request("/api/v1/campaigns", { key: seed.liveKey })).json();
    expect(live.data.map((x: { id: string }) => x.id)).toEqual(["cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0D"]);
    const test = await (
      await ctx.request("/api/v1/campaigns?livemode=false&limit=100", { key: seed.testKey })
    ).json();
    expect(test.data.length).toBeGreaterThan(0);
    expect(test.data.every((x: { livemode: boolean }) => x.livemode === false)).toBe(true);
    const got = await ctx.request(`/api/v1/campaigns/${created.id}`, { key: seed.testKey });
    expect(got.status).toBe(200);
    expect((await got.json()).id).toBe(created.id);
  });

  test("pages newest first, status filter, and the list's errors", async () => {
    const a = await (await createCampaign(ctx, seed.testKey, valid())).json();
    const b = await (await createCampaign(ctx, seed.testKey, valid())).json();
    const page = await (await ctx.request("/api/v1/campaigns?limit=1", { key: seed.testKey })).json();
    expect(page).toEqual({ data: [b], has_more: true });
    const next = await (
      await ctx.request(`/api/v1/campaigns?limit=1&starting_after=${b.id}`, { key: seed.testKey })
    ).json();
    expect(next.data[0].id).toBe(a.id);
    await ctx.request(`/api/v1/campaigns/${a.id}/cancel`, { method: "POST", key: seed.testKey });
    const cancelled = await (
      await ctx.request("/api/v1/campaigns?status=cancelled", { key: seed.testKey })
    ).json();
    expect(cancelled.data.map((x: { id: string }) => x.id)).toEqual([a.id]);

    const q = (s: string, key = seed.testKey) => ctx.request(`/api/v1/campaigns?${s}`, { key });
    await expectApiError(await q("livemode=true"), 400, "invalid_query", { param: "livemode" });
    await expectApiError(await q("livemode=false", seed.liveKey), 400, "invalid_query", {
      param: "livemode",
    });
    await expectApiError(await q("livemode=yes"), 400, "invalid_query", { param: "livemode" });
    await expectApiError(await q("status=done"), 400, "invalid_query", { param: "status" });
    await expectApiError(await q("limit=0"), 400, "invalid_query", { param: "limit" });
    await expectApiError(await q("limit=101"), 400, "invalid_query", { param: "limit" });
    await expectApiError(await q("limit="), 400, "invalid_query", { param: "limit" });
    await expectApiError(await q("starting_after=nope"), 400, "invalid_query", { param: "starting_after" });
    await expectApiError(await q("colour=blue"), 400, "invalid_query", { param: "colour" });
    // Unknown, of another mode, outside the filter, or of another resource type: invalid_cursor.
    await expectApiError(await q("starting_after=cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"), 400, "invalid_cursor", {
      param: "starting_after",
    });
    await expectApiError(await q("starting_after=cmp_01JD8Y3M6W9Q2T4V5X7Z8A9B0D"), 400, "invalid_cursor", {
      param: "starting_after",
    });
    await expectApiError(await q(`status=cancelled&starting_after=${b.id}`), 400, "invalid_cursor", {
      param: "starting_after",
    });
    await expectApiError(await q(`starting_after=${seed.agent.id}`), 400, "invalid_cursor", {
      param: "starting_after",
    });
  });
});

describe("the engine's retries (not reachable with simulated calls, which always answer)", () => {
  test("an unanswered call is retried while attempts remain, then the contact fails", async () => {
    const { campaignSteps } = await import("../../src/services/campaigns.ts");
    const org = await createOrganization(ctx.deps, { name: "Retry", paidPlan: false, planMinutes: 0 });
    const agent = await createAgent(ctx.deps, org.id, { name: "Caller" });
    const key = await createSecretKey(ctx.deps, org.id, { mode: "test", scopes: ["*"] });
    const created = await (
      await createCampaign(ctx, key.key, {
        name: "Retry",
        agentId: agent.id,
        contacts: phones(1),
        concurrency: 1,
        maxAttempts: 2,
        retryDelaySeconds: 0,
      })
    ).json();
    const step = async () => {
      await ctx.deps.sql.begin((tx) =>
        campaignSteps(ctx.deps)({
          tx: tx as never,
          timers: [
            {
              id: "0",
              kind: "campaign.advance",
              payload: { campaignId: created.id },
              dueAt: new Date(),
              attempts: 0,
            },
          ],
          schedule: async () => [],
          afterCommit: () => {},
          followUps: () => {
            throw new Error("not used by campaign steps");
          },
          scheduled: () => {},
        }),
      );
      return (await ctx.request(`/api/v1/campaigns/${created.id}`, { key: key.key })).json();
    };
    const endOpenCall = () =>
      ctx.deps
        .sql`update calls set status = 'no_answer' where campaign_id = ${created.id} and status <> 'no_answer'`;

    await endOpenCall();
    const retried = await step();
    expect(retried.progress).toMatchObject({ pending: 0, inProgress: 1, completed: 0, failed: 0 });
    const [{ n }] = (await ctx.deps.sql`
      select count(*)::int as n from calls where campaign_id = ${created.id}`) as unknown as [{ n: number }];
    expect(n).toBe(2);

    await endOpenCall();
    const failed = await step();
    expect(failed).toMatchObject({
      status: "completed",
      progress: { total: 1, pending: 0, inProgress: 0, completed: 1, succeeded: 0, failed: 1, cancelled: 0 },
    });
    // A further step changes nothing and emits nothing.
    const events = await ctx.deps.sql`select type from events where data->>'id' = ${created.id} order by id`;
    expect(await step()).toEqual(failed);
    expect(await ctx.deps.sql`select type from events where data->>'id' = ${created.id} order by id`).toEqual(
      events,
    );
    expect(events.map((e) => e.type)).toEqual(["campaign.started", "campaign.completed"]);
  });

  test("a cancel after the last call ended, before the engine saw it, completes the campaign instead", async () => {
    const created = await (
      await createCampaign(ctx, seed.testKey, { ...valid(), contacts: phones(1) })
    ).json();
    await ctx.deps.sql`update calls set status = 'completed' where campaign_id = ${created.id}`;
    const res = await ctx.request(`/api/v1/campaigns/${created.id}/cancel`, {
      method: "POST",
      key: seed.testKey,
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({
      status: "completed",
      progress: { total: 1, pending: 0, inProgress: 0, completed: 1, succeeded: 1, failed: 0, cancelled: 0 },
    });
    expect(body.completedAt).not.toBeNull();
    const events = await ctx.deps.sql`select type from events where data->>'id' = ${created.id} order by id`;
    expect(events.map((e) => e.type)).toEqual(["campaign.started", "campaign.completed"]);
  });
});
