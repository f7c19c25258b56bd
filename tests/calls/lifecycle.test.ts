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

    const early = await ctx.request(`/api/v1/calls/${created.id}/transcript`, { key: seed.testKey });
    await expectApiError(early, 404, "not_found");

    const seen: string[] = [];
    let call = created;
    await waitUntil(
      "the call to complete",
      async () => {
        call = await (await ctx.request(`/api/v1/calls/${created.id}`, { key: seed.testKey })).json();
        if (seen.at(-1) !== call.status) seen.push(call.status);
        if (call.status === "ongoing") expect(call.startedAt).not.toBeNull();
        return call.status === "completed";
      },
      { timeoutMs: 10_000, stepMs: 5 },
    );
    expect(seen[0]).toBe("initiated");
    expect(seen).toContain("ongoing");
    expect(seen.at(-1)).toBe("completed");
    expect(seen.every((s, i) => ["initiated", "ringing", "ongoing", "completed"].indexOf(s) >= i - 1)).toBe(
      true,
    );

    expect(call.durationSeconds).toBeGreaterThanOrEqual(30);
    expect(call.durationSeconds).toBeLessThanOrEqual(89);
    // endedAt − startedAt is the duration scaled, exactly; startedAt is 5 s (scaled) after creation.
    const started = Date.parse(call.startedAt);
    const ended = Date.parse(call.endedAt);
    expect(ended - started).toBe(Math.round(call.durationSeconds * 1000 * SCALE));
    expect(started - Date.parse(call.createdAt)).toBeGreaterThanOrEqual(5000 * SCALE - 50);
    expect(started - Date.parse(call.createdAt)).toBeLessThanOrEqual(5000 * SCALE + 50);
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
    expect(evs[0]!.data).toMatchObject({ id: created.id, status: "ongoing", startedAt: call.startedAt });
    // The end, then the results ready: two changes, so the end's updatedAt is the earlier.
    const endedAt = String(evs[1]!.data.updatedAt);
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
