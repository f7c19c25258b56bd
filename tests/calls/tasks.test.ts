import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createSecretKey } from "../../src/services/keys.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import type { TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { waitUntil } from "../helpers/wait.ts";
import { type PhoneWorld, seedPhoneOrganization, startPhoneWorld } from "../phone/support.ts";
import { writeCounts } from "./support.ts";

let world: PhoneWorld;
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedPhoneOrganization>>;
let unpaid: Awaited<ReturnType<typeof seedPhoneOrganization>>;
let noCarrier: Awaited<ReturnType<typeof seedPhoneOrganization>>;

beforeAll(async () => {
  // No trunk in the environment: an organization has a carrier only with a trunk of its own.
  world = await startPhoneWorld({ timers: true, env: { LIVEKIT_SIP_TRUNK_ID: "" } });
  ctx = world.ctx;
  seed = await seedPhoneOrganization(ctx, { sipTrunkId: "ST_seed" });
  unpaid = await seedPhoneOrganization(ctx, { sipTrunkId: "ST_unpaid", paidPlan: false });
  noCarrier = await seedPhoneOrganization(ctx);
});
afterAll(() => world.close());

const inFuture = (ms: number) => new Date(Date.now() + ms).toISOString();
const createLive = (key: string, json: Record<string, unknown>) =>
  ctx.request("/api/v1/calls", {
    method: "POST",
    key,
    json: { agentId: seed.agent.id, to: "+33612345678", ...json },
  });

describe("tasks with a test key", () => {
  test("GET /v1/tasks and DELETE /v1/tasks/{id} are 403 test_mode_not_supported, before any id lookup", async () => {
    const list = await ctx.request("/api/v1/tasks", { key: seed.testKey });
    await expectApiError(list, 403, "test_mode_not_supported");
    for (const id of ["garbage", "task_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"]) {
      const del = await ctx.request(`/api/v1/tasks/${id}`, { method: "DELETE", key: seed.testKey });
      await expectApiError(del, 403, "test_mode_not_supported");
    }
  });

  test("scopes: tasks:read to list, tasks:write to delete", async () => {
    const c = ctx.deps;
    const k = await createSecretKey(c, seed.org.id, { mode: "live", scopes: ["calls:read"] });
    expect((await ctx.request("/api/v1/tasks", { key: k.key })).status).toBe(403);
    const del = await ctx.request("/api/v1/tasks/task_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", {
      method: "DELETE",
      key: k.key,
    });
    await expectApiError(del, 403, "missing_scope");
  });
});

describe("live POST /v1/calls", () => {
  test("no paid plan: 403 plan_required, even with a runAt; nothing written", async () => {
    const before = await writeCounts(ctx.deps.sql);
    for (const extra of [{}, { runAt: inFuture(60_000) }]) {
      const res = await ctx.request("/api/v1/calls", {
        method: "POST",
        key: unpaid.liveKey,
        json: { agentId: unpaid.agent.id, to: "+33612345678", ...extra },
      });
      await expectApiError(res, 403, "plan_required");
    }
    expect(await writeCounts(ctx.deps.sql)).toEqual(before);
  });

  test("paid plan but no trunk, now, a past or a future runAt: 503 carrier_unavailable; nothing written", async () => {
    const before = await writeCounts(ctx.deps.sql);
    for (const extra of [{}, { runAt: "2020-01-01T00:00:00Z" }, { runAt: inFuture(60_000) }]) {
      const res = await ctx.request("/api/v1/calls", {
        method: "POST",
        key: noCarrier.liveKey,
        json: { agentId: noCarrier.agent.id, to: "+33612345678", ...extra },
      });
      await expectApiError(res, 503, "carrier_unavailable");
    }
    expect(await writeCounts(ctx.deps.sql)).toEqual(before);
  });

  test("a future runAt creates a scheduled call and a task, listed until deleted; delete cancels the call", async () => {
    const runAt = inFuture(30 * 86_400_000);
    const res = await createLive(seed.liveKey, { runAt, variables: { firstName: "Hugo" } });
    expect(res.status).toBe(201);
    const call = await res.json();
    expect(call).toMatchObject({
      livemode: true,
      status: "scheduled",
      direction: "outbound",
      to: "+33612345678",
    });
    expect(call.taskId).toMatch(/^task_[0-9A-HJKMNP-TV-Z]{26}$/);

    const list = await ctx.request("/api/v1/tasks", { key: seed.liveKey });
    expect(list.status).toBe(200);
    const { tasks } = await list.json();
    expect(tasks).toEqual([
      {
        id: call.taskId,
        type: "call",
        callId: call.id,
        agentId: seed.agent.id,
        to: "+33612345678",
        runAt,
        status: "scheduled",
        createdAt: call.createdAt,
      },
    ]);
    // Another organization sees none of it.
    expect(await (await ctx.request("/api/v1/tasks", { key: unpaid.liveKey })).json()).toEqual({ tasks: [] });
    const foreignDelete = await ctx.request(`/api/v1/tasks/${call.taskId}`, {
      method: "DELETE",
      key: unpaid.liveKey,
    });
    expect(foreignDelete.status).toBe(404);

    const del = await ctx.request(`/api/v1/tasks/${call.taskId}`, { method: "DELETE", key: seed.liveKey });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ id: call.taskId, deleted: true });
    expect(await (await ctx.request("/api/v1/tasks", { key: seed.liveKey })).json()).toEqual({ tasks: [] });
    const after = await (await ctx.request(`/api/v1/calls/${call.id}`, { key: seed.liveKey })).json();
    expect(after).toMatchObject({ status: "cancelled", startedAt: null, outcome: null });
    expect(Date.parse(after.endedAt)).toBeGreaterThanOrEqual(Date.parse(call.createdAt));
    // Its end is told like every end of a live call: call.ended once, with the call as it is.
    const evs = await ctx.deps.sql<{ type: string; livemode: boolean; data: Record<string, unknown> }[]>`
      select type, livemode, data from events where data->>'id' = ${call.id}`;
    expect(evs.map((e) => [e.type, e.livemode])).toEqual([["call.ended", true]]);
    expect(evs[0]!.data).toEqual(after);
    const timers = await ctx.deps.sql`select id from timers where payload->>'taskId' = ${call.taskId}`;
    expect(timers.length).toBe(0);

    const again = await ctx.request(`/api/v1/tasks/${call.taskId}`, { method: "DELETE", key: seed.liveKey });
    await expectApiError(again, 404, "not_found");
    for (const id of ["garbage", "task_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"]) {
      const r = await ctx.request(`/api/v1/tasks/${id}`, { method: "DELETE", key: seed.liveKey });
      expect(r.status).toBe(404);
    }
  });

  test("when the task runs with no carrier, the call ends failed and the task leaves the list", async () => {
    const res = await createLive(seed.liveKey, { runAt: inFuture(3_600_000) });
    expect(res.status).toBe(201);
    const call = await res.json();
    // The trunk is removed before the task fires, which the test then brings about (its timer due now).
    await updateOrganization(ctx.deps, seed.org.id, { sipTrunkId: null });
    await ctx.deps
      .sql`update timers set due_at = now() where kind = 'task.run' and payload->>'taskId' = ${call.taskId}`;
    await waitUntil("the call to fail", async () => {
      const c = await (await ctx.request(`/api/v1/calls/${call.id}`, { key: seed.liveKey })).json();
      return c.status === "failed";
    });
    const { tasks } = await (await ctx.request("/api/v1/tasks", { key: seed.liveKey })).json();
    expect(tasks.map((t: { id: string }) => t.id)).not.toContain(call.taskId);
    const evs = await ctx.deps.sql<{ type: string; livemode: boolean; data: { status: string } }[]>`
      select type, livemode, data from events where data->>'id' = ${call.id}`;
    expect(evs.map((e) => [e.type, e.livemode, e.data.status])).toEqual([["call.ended", true, "failed"]]);
    const del = await ctx.request(`/api/v1/tasks/${call.taskId}`, { method: "DELETE", key: seed.liveKey });
    expect(del.status).toBe(404);
    await updateOrganization(ctx.deps, seed.org.id, { sipTrunkId: "ST_seed" });
  });

  test("runAt too far ahead is 400 invalid_request", async () => {
    const res = await createLive(seed.liveKey, { runAt: "2099-01-01T00:00:00Z" });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: "invalid_request", param: "runAt" });
  });
});
