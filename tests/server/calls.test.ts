import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { type FakeLiveKit, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import { type Seed, type Server, seed, startServer } from "./support.ts";

/**
 * Calls over HTTP: a simulated call played by the server's own durable timers, its transcript and
 * events; the live-call refusals; scheduled calls as tasks.
 */

let server: Server;
let liveKit: FakeLiveKit;
let s: Seed;
let unpaid: Seed;
let noTrunk: Seed;
beforeAll(async () => {
  // LiveKit is configured; an organization has a carrier once it has an outbound SIP trunk.
  liveKit = await startFakeLiveKit();
  server = await startServer({ env: liveKit.env });
  s = await seed(server);
  await server.admin("PATCH", `/organizations/${s.org.id}`, { sipTrunkId: "ST_server_test" });
  unpaid = await seed(server, { paidPlan: false });
  noTrunk = await seed(server);
});
afterAll(async () => {
  await server.stop();
  await liveKit.close();
});

const create = (json: Record<string, unknown>, key = s.testKey) =>
  server.fetch("/api/v1/calls", {
    method: "POST",
    key,
    json: { agentId: s.agent.id, to: "+33612345678", ...json },
  });

interface Call {
  id: string;
  status: string;
  livemode: boolean;
  startedAt: string | null;
  endedAt: string | null;
  durationSeconds: number | null;
  summary: string | null;
  taskId?: string;
  createdAt: string;
}

describe("a simulated call", () => {
  test("201 initiated at once, then ringing, ongoing and completed, each event once, and its transcript", async () => {
    const res = await create({ variables: { firstName: "Claire" } });
    expect(res.status).toBe(201);
    const created = (await res.json()) as Call;
    expect(created).toMatchObject({
      livemode: false,
      status: "initiated",
      direction: "outbound",
      to: "+33612345678",
    });
    expect(created.id).toMatch(/^call_[0-9A-HJKMNP-TV-Z]{26}$/);

    const done = await waitUntil("the call to complete", async () => {
      const call = (await (
        await server.fetch(`/api/v1/calls/${created.id}`, { key: s.testKey })
      ).json()) as Call;
      return call.status === "completed" && call;
    });
    expect(done.durationSeconds).toBeGreaterThanOrEqual(30);
    expect(done.durationSeconds).toBeLessThanOrEqual(89);
    // Played on its schedule (SIMULATION_TIME_SCALE 0.01), by the times it recorded, however soon this
    // looked: answered at least 5 s (scaled) after its creation, ended exactly its duration later.
    const started = Date.parse(done.startedAt!);
    expect(started - Date.parse(done.createdAt)).toBeGreaterThanOrEqual(5000 * 0.01);
    expect(Date.parse(done.endedAt!) - started).toBe(done.durationSeconds! * 1000 * 0.01);

    const transcript = await waitUntil("the transcript", async () => {
      const res = await server.fetch(`/api/v1/calls/${created.id}/transcript`, { key: s.testKey });
      return res.status === 200 && res;
    });
    const body = await transcript.json();
    expect(body).toMatchObject({ callId: created.id, livemode: false });
    expect(body.segments.length).toBeGreaterThan(1);
    for (const segment of body.segments) {
      expect(["agent", "contact"]).toContain(segment.speaker);
      expect(typeof segment.text).toBe("string");
    }

    const events = await waitUntil("the call's four events", async () => {
      const page = await (await server.fetch("/api/v1/events?limit=100", { key: s.testKey })).json();
      const types = (page.data as { type: string; data: { id?: string; callId?: string } }[])
        .filter((e) => e.data.id === created.id || e.data.callId === created.id)
        .map((e) => e.type)
        .sort();
      return types.length >= 4 && types;
    });
    expect(events).toEqual(["call.analysis_ready", "call.ended", "call.started", "call.transcript_ready"]);
  });

  test("the transcript is 404 not_found until the call has one; a live key never sees the test call", async () => {
    // A call that has not taken place (scheduled a week ahead) has none, whenever this asks.
    const runAt = new Date(Date.now() + 7 * 86_400_000).toISOString();
    const scheduled = (await (await create({ runAt }, s.liveKey)).json()) as Call;
    expect(
      await outcomeOf(await server.fetch(`/api/v1/calls/${scheduled.id}/transcript`, { key: s.liveKey })),
    ).toBe("404 not_found");
    await server.fetch(`/api/v1/tasks/${scheduled.taskId}`, { method: "DELETE", key: s.liveKey });
    const created = (await (await create({})).json()) as Call;
    for (const path of [`/api/v1/calls/${created.id}`, `/api/v1/calls/${created.id}/transcript`]) {
      expect(await outcomeOf(await server.fetch(path, { key: s.liveKey }))).toBe("404 not_found");
    }
  });

  test("the list filters by status and agent", async () => {
    const created = (await (await create({})).json()) as Call;
    const page = await (
      await server.fetch(`/api/v1/calls?agentId=${s.agent.id}&limit=100`, { key: s.testKey })
    ).json();
    expect(page.data.map((c: Call) => c.id)).toContain(created.id);
    const none = await (
      await server.fetch("/api/v1/calls?agentId=agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", { key: s.testKey })
    ).json();
    expect(none.data).toEqual([]);
    const completed = await (
      await server.fetch("/api/v1/calls?status=completed&limit=100", { key: s.testKey })
    ).json();
    expect(completed.data.every((c: Call) => c.status === "completed")).toBe(true);
  });
});

describe("refusals", () => {
  test("a number that is not E.164 or an unknown agent is refused naming the field", async () => {
    const badPhone = await create({ to: "0612345678" });
    await expectApiError(badPhone, 400, "invalid_request", { param: "to" });
    const unknown = await create({ agentId: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
    await expectApiError(unknown, 404, "not_found", { param: "agentId" });
  });

  test("live: without a paid plan 403 plan_required; with one but no carrier 503 carrier_unavailable", async () => {
    const noPlan = await server.fetch("/api/v1/calls", {
      method: "POST",
      key: unpaid.liveKey,
      json: { agentId: unpaid.agent.id, to: "+33612345678" },
    });
    expect(await outcomeOf(noPlan)).toBe("403 plan_required");
    const noCarrier = await server.fetch("/api/v1/calls", {
      method: "POST",
      key: noTrunk.liveKey,
      json: { agentId: noTrunk.agent.id, to: "+33612345678" },
    });
    expect(await outcomeOf(noCarrier)).toBe("503 carrier_unavailable");
  });
});

describe("scheduled calls", () => {
  test("a future runAt makes a scheduled call and a task, listed until deleted; deleting cancels the call", async () => {
    const runAt = new Date(Date.now() + 7 * 86_400_000).toISOString();
    const res = await create({ runAt }, s.liveKey);
    expect(res.status).toBe(201);
    const call = (await res.json()) as Call;
    expect(call.status).toBe("scheduled");
    expect(call.taskId).toMatch(/^task_[0-9A-HJKMNP-TV-Z]{26}$/);
    const { tasks } = await (await server.fetch("/api/v1/tasks", { key: s.liveKey })).json();
    expect(tasks).toEqual([
      {
        id: call.taskId,
        type: "call",
        callId: call.id,
        agentId: s.agent.id,
        to: "+33612345678",
        runAt,
        status: "scheduled",
        createdAt: call.createdAt,
      },
    ]);
    const del = await server.fetch(`/api/v1/tasks/${call.taskId}`, { method: "DELETE", key: s.liveKey });
    expect(await del.json()).toEqual({ id: call.taskId, deleted: true });
    expect(await (await server.fetch("/api/v1/tasks", { key: s.liveKey })).json()).toEqual({ tasks: [] });
    expect((await (await server.fetch(`/api/v1/calls/${call.id}`, { key: s.liveKey })).json()).status).toBe(
      "cancelled",
    );
  });

  test("tasks are live only: a test key is 403 test_mode_not_supported", async () => {
    expect(await outcomeOf(await server.fetch("/api/v1/tasks", { key: s.testKey }))).toBe(
      "403 test_mode_not_supported",
    );
  });
});
