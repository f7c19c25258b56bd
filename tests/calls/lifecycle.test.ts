import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { waitUntil } from "../helpers/wait.ts";

const SCALE = 0.02;
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext({ timers: true, env: { SIMULATION_TIME_SCALE: String(SCALE) } });
  seed = await seedOrganization(ctx, { paidPlan: false });
});
afterAll(() => ctx.close());

const CALL_KEYS = [
  "agentId",
  "campaignId",
  "collectedData",
  "contactId",
  "createdAt",
  "direction",
  "durationSeconds",
  "endedAt",
  "id",
  "livemode",
  "outcome",
  "recordingUrl",
  "startedAt",
  "status",
  "successful",
  "summary",
  "to",
  "updatedAt",
];

async function events(callId: string) {
  return ctx.deps.sql<{ id: string; type: string; livemode: boolean; data: Record<string, unknown> }[]>`
    select id, type, livemode, data from events where data->>'id' = ${callId} or data->>'callId' = ${callId}
    order by id`;
}

describe("simulated call over HTTP", () => {
  test("201 at once, then ringing, ongoing and completed on schedule, with each event once", async () => {
    // The timers wait while the fresh call is looked at, so what is seen of it does not depend on how
    // quickly this process gets there: the schedule is read from the times the service recorded.
    await ctx.runner!.stop();
    const res = await ctx.request("/api/v1/calls", {
      method: "POST",
      key: seed.testKey,
      json: { agentId: seed.agent.id, to: "+33612345678", variables: { firstName: "Claire" } },
    });
    expect(res.status).toBe(201);
    const created = await res.json();
    expect(Object.keys(created).sort()).toEqual(CALL_KEYS);
    expect(created).toMatchObject({
      livemode: false,
      status: "initiated",
      agentId: seed.agent.id,
      to: "+33612345678",
      contactId: null,
      campaignId: null,
      direction: "outbound",
      startedAt: null,
      endedAt: null,
      durationSeconds: null,
      summary: null,
      collectedData: null,
      successful: null,
      outcome: null,
      recordingUrl: null,
    });
    expect(created.id).toMatch(/^call_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(created.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    // The creation has returned, so the call was written before this moment.
    const answered = Date.now();

    const fresh = await (await ctx.request(`/api/v1/calls/${created.id}`, { key: seed.testKey })).json();
    expect(fresh).toEqual(created);
    const early = await ctx.request(`/api/v1/calls/${created.id}/transcript`, { key: seed.testKey });
    await expectApiError(early, 404, "not_found");
    // Its one timer: ringing, 2 s (scaled) after the call was written, which was after createdAt and
    // before the answer.
    const timers = await ctx.deps.sql<{ due_at: Date; payload: Record<string, unknown> }[]>`
      select due_at, payload from timers where payload->>'callId' = ${created.id}`;
    expect(timers.map((t) => t.payload)).toEqual([{ callId: created.id, to: "ringing" }]);
    const ringDue = timers[0]!.due_at.getTime();
    expect(ringDue).toBeGreaterThanOrEqual(Date.parse(created.createdAt) + 2000 * SCALE);
    expect(ringDue).toBeLessThanOrEqual(answered + 2000 * SCALE);

    await ctx.runner!.start();
    const seen: string[] = [fresh.status];
    const bodies = new Map<string, unknown>();
    let call = created;
    await waitUntil(
      "the call to complete",
      async () => {
        call = await (await ctx.request(`/api/v1/calls/${created.id}`, { key: seed.testKey })).json();
        if (seen.at(-1) !== call.status) seen.push(call.status);
        bodies.set(call.status, call);
        return call.status === "completed";
      },
      { stepMs: 5 },
    );
    // Whatever the polling caught, in order; how long each state lasted on this machine is not the
    // point (the times below are). The call.started event below is the call as it was while ongoing.
    expect(seen.at(-1)).toBe("completed");
    expect(seen).toEqual(["initiated", "ringing", "ongoing", "completed"].filter((s) => seen.includes(s)));

    expect(call.durationSeconds).toBeGreaterThanOrEqual(30);
    expect(call.durationSeconds).toBeLessThanOrEqual(89);
    // On schedule, by the recorded times: answered 3 s (scaled) after the ring's due time, so 5 s after
    // creation, and endedAt − startedAt is the duration scaled, exactly, however late the timers fired.
    const started = Date.parse(call.startedAt);
    const ended = Date.parse(call.endedAt);
    expect(started).toBe(ringDue + 3000 * SCALE);
    expect(ended - started).toBe(Math.round(call.durationSeconds * 1000 * SCALE));
    expect(call).toMatchObject({
      successful: true,
      outcome: "answered_human",
      recordingUrl: null,
      livemode: false,
    });
    expect(Object.keys(call.collectedData).sort()).toEqual(["appointment_date", "reason"]);
    expect(call.collectedData.appointment_date).toMatch(/^\d{4}-\d\d-\d\d$/);
    expect(call.summary).toContain("Claire");

    const tr = await ctx.request(`/api/v1/calls/${created.id}/transcript`, { key: seed.testKey });
    expect(tr.status).toBe(200);
    const transcript = await tr.json();
    expect(transcript.callId).toBe(created.id);
    expect(transcript.livemode).toBe(false);
    expect(transcript.segments.length).toBeGreaterThan(3);
    for (const s of transcript.segments) {
      expect(["agent", "contact"]).toContain(s.speaker);
      expect(typeof s.text).toBe("string");
      expect(s.offsetSeconds).toBeLessThan(call.durationSeconds);
    }

    await waitUntil("the call's four events", async () => (await events(created.id)).length >= 4);
    await Bun.sleep(100);
    const evs = await events(created.id);
    expect(evs.map((e) => e.type)).toEqual([
      "call.started",
      "call.ended",
      "call.transcript_ready",
      "call.analysis_ready",
    ]);
    expect(evs.every((e) => e.livemode === false && e.id.startsWith("evt_"))).toBe(true);
    // The call while ongoing: started, nothing of its end yet.
    const pending = {
      endedAt: null,
      durationSeconds: null,
      summary: null,
      collectedData: null,
      successful: null,
    };
    const startedUpdatedAt = String(evs[0]!.data.updatedAt);
    expect(evs[0]!.data).toEqual({
      ...call,
      ...pending,
      outcome: null,
      status: "ongoing",
      updatedAt: startedUpdatedAt,
    });
    if (bodies.has("ongoing")) expect(bodies.get("ongoing")).toEqual(evs[0]!.data);
    // The end, then the results ready: two changes, so the end's updatedAt is the earlier.
    const endedAt = String(evs[1]!.data.updatedAt);
    expect(Date.parse(startedUpdatedAt)).toBeLessThan(Date.parse(endedAt));
    expect(Date.parse(endedAt)).toBeLessThan(Date.parse(call.updatedAt));
    expect(evs[1]!.data).toEqual({ ...call, updatedAt: endedAt });
    expect(evs[2]!.data).toEqual(transcript);
    expect(evs[3]!.data).toEqual(call);
    expect((await ctx.deps.sql`select id from timers`).length).toBe(0);
  });

  test("many calls at once all complete, each transition and event exactly once", async () => {
    const n = 40;
    const ids = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const res = await ctx.request("/api/v1/calls", {
          method: "POST",
          key: seed.testKey,
          json: { agentId: seed.agent.id, to: `+3361234${String(i).padStart(4, "0")}` },
        });
        expect(res.status).toBe(201);
        return (await res.json()).id as string;
      }),
    );
    await waitUntil(
      `all ${n} calls to complete`,
      async () => {
        const [r] = await ctx.deps.sql<{ n: number }[]>`
        select count(*)::int as n from calls where id = any(${ids}) and status = 'completed'`;
        return r!.n === n;
      },
      { timeoutMs: 15_000 },
    );
    await Bun.sleep(100);
    const rows = await ctx.deps.sql<{ type: string; n: number }[]>`
      select type, count(*)::int as n from events where data->>'id' = any(${ids}) or data->>'callId' = any(${ids})
      group by type order by type`;
    expect([...rows]).toEqual([
      { type: "call.analysis_ready", n },
      { type: "call.ended", n },
      { type: "call.started", n },
      { type: "call.transcript_ready", n },
    ]);
    const perCall = await ctx.deps.sql<{ n: number }[]>`
      select count(*)::int as n from events where data->>'id' = any(${ids}) or data->>'callId' = any(${ids})
      group by coalesce(data->>'id', data->>'callId')`;
    expect(perCall.every((r) => r.n === 4)).toBe(true);
    // Varied fiction: durations and summaries differ from call to call.
    const varied = await ctx.deps.sql<{ d: number; s: number }[]>`
      select count(distinct duration_seconds)::int as d, count(distinct summary)::int as s from calls where id = any(${ids})`;
    expect(varied[0]!.d).toBeGreaterThan(5);
    expect(varied[0]!.s).toBeGreaterThan(5);
  });

  test("French content follows the agent's language or a `language` variable", async () => {
    const make = async (variables: Record<string, string>) => {
      const res = await ctx.request("/api/v1/calls", {
        method: "POST",
        key: seed.testKey,
        json: { agentId: seed.agent.id, to: "+33612345678", variables },
      });
      return (await res.json()).id as string;
    };
    const fr = await make({ language: "fr-FR", prenom: "Léa" });
    const en = await make({ language: "en" });
    await waitUntil("both calls to complete", async () => {
      const rows = await ctx.deps
        .sql`select 1 from calls where id in (${fr}, ${en}) and status = 'completed'`;
      return rows.length === 2;
    });
    const get = async (id: string) =>
      (await ctx.request(`/api/v1/calls/${id}`, { key: seed.testKey })).json();
    expect((await get(fr)).summary).toMatch(/Léa a pris rendez-vous/);
    expect((await get(en)).summary).toMatch(/booked an appointment/);
  });
});
