import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { TEST_DATABASE } from "../helpers/db.ts";
import { expectApiError } from "../helpers/errors.ts";
import { liveKitEvents } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  mintToken,
  type Seed,
  seedOrganization,
  startCall,
  startWorld,
  type WebCallWorld,
} from "../webcalls/support.ts";

/** The results a live call's voice agent reports, and the events they cause (exactly once). */

let w: WebCallWorld;
let seed: Seed;

beforeAll(async () => {
  w = await startWorld({ timers: true });
  seed = await seedOrganization(w.ctx, { planMinutes: 100_000, cap: 100_000 });
});
afterAll(() => w.close());

const SEGMENTS = [
  { speaker: "agent", text: "Hello, Rivoli dental practice.", offsetSeconds: 0.4 },
  { speaker: "contact", text: "I would like an appointment on Thursday.", offsetSeconds: 3 },
  { speaker: "agent", text: "Thursday at ten works.", offsetSeconds: 3 },
];
const ALL_EVENTS = ["call.started", "call.ended", "call.transcript_ready", "call.analysis_ready"];
const FULL = {
  transcript: SEGMENTS,
  summary: "Booked a check-up on Thursday at 10:00.",
  collectedData: {
    appointment_date: "2026-11-27T10:00",
    reason: "check-up",
    adults: 1,
    urgent: false,
    note: null,
  },
  successful: true,
  outcome: "appointment_booked",
  recordingUrl: "https://recordings.example.com/a.ogg",
};

/** A live web call, `initiated` (nobody joined yet). */
async function liveCall(agentId = seed.agent.id): Promise<string> {
  const token = await mintToken(w.ctx, seed.liveKey, agentId);
  const res = await startCall(w.ctx, { sessionToken: token });
  expect(res.status).toBe(201);
  return (await res.json()).callId;
}

async function deliver(event: Record<string, unknown>) {
  const { body, headers } = await w.liveKit.signWebhook(event);
  const res = await w.ctx.request("/api/livekit/webhook", { method: "POST", body, headers });
  expect(res.status).toBe(200);
}
const join = (id: string) => deliver(liveKitEvents.participantJoined(id, `visitor-${id}`));
const finish = (id: string) => deliver(liveKitEvents.roomFinished(id));

async function ongoingCall(): Promise<string> {
  const id = await liveCall();
  await join(id);
  return id;
}

function report(id: string, json: unknown, key = seed.liveKey) {
  return w.ctx.request(`/api/v1/calls/${id}/results`, { method: "POST", key, json });
}

/** The call's events, oldest first, as `type`. */
async function eventsOf(id: string): Promise<string[]> {
  const rows = await w.ctx.deps.sql<{ type: string }[]>`
    select type from events where data->>'id' = ${id} or data->>'callId' = ${id} order by id`;
  return rows.map((r) => r.type);
}

async function reportedAt(id: string) {
  const [row] = await w.ctx.deps.sql<{ results_reported_at: Date | null }[]>`
    select results_reported_at from calls where id = ${id}`;
  return row!.results_reported_at;
}

describe("reported while the call is ongoing", () => {
  test("200 with the call; the events and the transcript wait for the end, then come once", async () => {
    const id = await ongoingCall();
    const res = await report(id, FULL);
    expect(res.status).toBe(200);
    const call = await res.json();
    expect(call).toMatchObject({
      id,
      livemode: true,
      status: "ongoing",
      summary: FULL.summary,
      collectedData: FULL.collectedData,
      successful: true,
      outcome: "appointment_booked",
      recordingUrl: FULL.recordingUrl,
    });
    expect(await eventsOf(id)).toEqual(["call.started"]);
    const early = await w.ctx.request(`/api/v1/calls/${id}/transcript`, { key: seed.liveKey });
    expect(early.status).toBe(404);

    await finish(id);
    expect(await eventsOf(id)).toEqual([
      "call.started",
      "call.ended",
      "call.transcript_ready",
      "call.analysis_ready",
    ]);
    const transcript = await w.ctx.request(`/api/v1/calls/${id}/transcript`, { key: seed.liveKey });
    expect(transcript.status).toBe(200);
    const current = await (await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.liveKey })).json();
    expect(await transcript.json()).toEqual({
      callId: id,
      livemode: true,
      segments: SEGMENTS,
      updatedAt: current.updatedAt,
    });

    const [ready] = await w.ctx.deps.sql<{ data: Record<string, unknown> }[]>`
      select data from events where type = 'call.analysis_ready' and data->>'id' = ${id}`;
    expect(ready!.data).toMatchObject({
      id,
      status: "completed",
      summary: FULL.summary,
      outcome: FULL.outcome,
    });
    const [tr] = await w.ctx.deps.sql<{ data: Record<string, unknown> }[]>`
      select data from events where type = 'call.transcript_ready' and data->>'callId' = ${id}`;
    expect(tr!.data).toEqual({
      callId: id,
      livemode: true,
      segments: SEGMENTS,
      updatedAt: current.updatedAt,
    });
    // The call's events, in the order of its changes, carry strictly increasing times; the analysis the last.
    const times = await w.ctx.deps.sql<{ at: string }[]>`
      select data->>'updatedAt' as at from events where data->>'id' = ${id} order by id`;
    expect(times.length).toBe(3);
    expect(times.map((t) => Date.parse(t.at))).toEqual(
      times.map((t) => Date.parse(t.at)).sort((a, b) => a - b),
    );
    expect(new Set(times.map((t) => t.at)).size).toBe(3);
    expect(times.at(-1)!.at).toBe(current.updatedAt);

    // A second report, and LiveKit repeating the end, change nothing.
    await expectApiError(await report(id, { summary: "again" }), 409, "results_already_reported");
    await finish(id);
    expect(await eventsOf(id)).toHaveLength(4);
    const read = await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.liveKey });
    expect((await read.json()).summary).toBe(FULL.summary);
  });

  test("a second report while ongoing is 409 results_already_reported and changes nothing", async () => {
    const id = await ongoingCall();
    expect((await report(id, { summary: "first" })).status).toBe(200);
    await expectApiError(
      await report(id, { summary: "second", outcome: "x" }),
      409,
      "results_already_reported",
    );
    const read = await (await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.liveKey })).json();
    expect(read).toMatchObject({ summary: "first", outcome: null });
  });
});

describe("reported after the end", () => {
  test("the events are recorded with the report, once", async () => {
    const id = await ongoingCall();
    await finish(id);
    expect(await eventsOf(id)).toEqual(["call.started", "call.ended"]);
    const res = await report(id, FULL);
    expect(res.status).toBe(200);
    expect((await res.json()).status).toBe("completed");
    expect(await eventsOf(id)).toEqual([
      "call.started",
      "call.ended",
      "call.transcript_ready",
      "call.analysis_ready",
    ]);
    await expectApiError(await report(id, FULL), 409, "results_already_reported");
    expect(await eventsOf(id)).toHaveLength(4);
  });

  test("without a transcript (left out, null or empty): call.analysis_ready only, and no transcript", async () => {
    for (const transcript of [undefined, null, []]) {
      const id = await ongoingCall();
      await finish(id);
      const body = transcript === undefined ? { successful: false } : { successful: false, transcript };
      expect((await report(id, body)).status).toBe(200);
      expect(await eventsOf(id)).toEqual(["call.started", "call.ended", "call.analysis_ready"]);
      const t = await w.ctx.request(`/api/v1/calls/${id}/transcript`, { key: seed.liveKey });
      expect(t.status).toBe(404);
    }
  });

  test("an empty report is a report: nothing learned, analysis ready", async () => {
    const id = await ongoingCall();
    await finish(id);
    const res = await report(id, {});
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      summary: null,
      collectedData: null,
      successful: null,
      outcome: null,
    });
    expect(await eventsOf(id)).toEqual(["call.started", "call.ended", "call.analysis_ready"]);
    await expectApiError(await report(id, {}), 409, "results_already_reported");
  });
});

describe("refusals", () => {
  test("a call that never started is 409 call_not_started: initiated, or ended no_answer", async () => {
    const initiated = await liveCall();
    await expectApiError(await report(initiated, FULL), 409, "call_not_started");
    expect(await reportedAt(initiated)).toBeNull();
    // As a web call's room found empty and never joined at its maxSeconds ends (services/liveCalls.ts).
    await w.ctx.deps.sql`update calls set status = 'no_answer', ended_at = now() where id = ${initiated}`;
    await expectApiError(await report(initiated, FULL), 409, "call_not_started");
    expect(await reportedAt(initiated)).toBeNull();
  });

  test("a web call whose room finished before a join was reported started then: its results are taken", async () => {
    const id = await liveCall();
    await finish(id);
    const res = await report(id, { summary: "Nobody spoke." });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id, status: "completed", summary: "Nobody spoke." });
    expect(await eventsOf(id)).toEqual(["call.started", "call.ended", "call.analysis_ready"]);
  });

  test("a test key is 403 test_mode_not_supported before the call or the body is looked at", async () => {
    const id = await ongoingCall();
    const simulated = await w.ctx.request("/api/v1/calls", {
      method: "POST",
      key: seed.testKey,
      json: { agentId: seed.agent.id, to: "+33612345678" },
    });
    const simulatedId = (await simulated.json()).id;
    for (const [callId, body] of [
      [id, FULL],
      [simulatedId, FULL],
      ["call_nope", FULL],
      ["call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", { transcript: "not a list" }],
    ] as const) {
      await expectApiError(await report(callId, body, seed.testKey), 403, "test_mode_not_supported");
    }
    expect(await reportedAt(id)).toBeNull();
  });

  test("malformed, unknown, foreign, simulated, or outside the key's agents: 404 not_found", async () => {
    const other = await createOrganization(w.ctx.deps, { name: "Other", paidPlan: true, planMinutes: 100 });
    const otherKey = await createSecretKey(w.ctx.deps, other.id, { mode: "live", scopes: ["*"] });
    const elsewhere = await createAgent(w.ctx.deps, seed.org.id, { name: "Elsewhere" });
    const restricted = await createSecretKey(w.ctx.deps, seed.org.id, {
      mode: "live",
      scopes: ["calls:write"],
      agentIds: [elsewhere.id],
    });
    const id = await ongoingCall();
    const simulated = await w.ctx.request("/api/v1/calls", {
      method: "POST",
      key: seed.testKey,
      json: { agentId: seed.agent.id, to: "+33612345678" },
    });
    const simulatedId = (await simulated.json()).id;
    for (const [callId, key] of [
      ["call_nope", seed.liveKey],
      ["call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", seed.liveKey],
      [seed.agent.id, seed.liveKey],
      [simulatedId, seed.liveKey],
      [id, otherKey.key],
      [id, restricted.key],
    ] as const) {
      await expectApiError(await report(callId, FULL, key), 404, "not_found");
    }
    expect(await reportedAt(id)).toBeNull();
  });

  const long = (n: number) => "x".repeat(n);
  const seg = (over: Record<string, unknown>) => ({ transcript: [{ ...SEGMENTS[0], ...over }] });
  test.each([
    ["a transcript that is not a list", { transcript: "hello" }, "transcript"],
    ["a speaker that is neither agent nor contact", seg({ speaker: "caller" }), "transcript.0.speaker"],
    ["a segment without text", { transcript: [{ speaker: "agent", offsetSeconds: 0 }] }, "transcript.0.text"],
    ["a text of 10,001 characters", seg({ text: long(10_001) }), "transcript.0.text"],
    ["a negative offset", seg({ offsetSeconds: -0.5 }), "transcript.0.offsetSeconds"],
    ["an offset as text", seg({ offsetSeconds: "1" }), "transcript.0.offsetSeconds"],
    ["an unknown segment field", seg({ confidence: 0.9 }), "transcript.0.confidence"],
    [
      "a decreasing offset",
      { transcript: [SEGMENTS[0], SEGMENTS[1], { ...SEGMENTS[2], offsetSeconds: 2.9 }] },
      "transcript.2.offsetSeconds",
    ],
    [
      "2,001 segments",
      {
        transcript: Array.from({ length: 2001 }, (_, i) => ({
          speaker: "agent",
          text: "a",
          offsetSeconds: i,
        })),
      },
      "transcript",
    ],
    ["a summary that is not text", { summary: 3 }, "summary"],
    ["a summary of 10,001 characters", { summary: long(10_001) }, "summary"],
    ["nested collected data", { collectedData: { a: { b: 1 } } }, "collectedData.a"],
    ["collected data as a list", { collectedData: [1] }, "collectedData"],
    ["successful as text", { successful: "yes" }, "successful"],
    ["an empty outcome", { outcome: "" }, "outcome"],
    ["an outcome of 65 characters", { outcome: long(65) }, "outcome"],
    ["an http recording URL", { recordingUrl: "http://recordings.example.com/a.ogg" }, "recordingUrl"],
    ["a recording URL that is no URL", { recordingUrl: "recording.ogg" }, "recordingUrl"],
    ["a recording URL with credentials", { recordingUrl: "https://u:p@example.com/a.ogg" }, "recordingUrl"],
    ["a recording URL of 2,049 characters", { recordingUrl: `https://e.com/${long(2035)}` }, "recordingUrl"],
    ["an unknown field", { duration: 3 }, "duration"],
  ])("%s is 400 invalid_request; nothing is stored", async (_name, body, param) => {
    const id = await ongoingCall();
    await expectApiError(await report(id, body), 400, "invalid_request", { param });
    expect(await reportedAt(id)).toBeNull();
  });

  test("not JSON is 400, another content type 415, a body over 1 MiB 413", async () => {
    const id = await ongoingCall();
    const raw = (body: string, type: string) =>
      w.ctx.request(`/api/v1/calls/${id}/results`, {
        method: "POST",
        key: seed.liveKey,
        body,
        headers: { "content-type": type },
      });
    await expectApiError(await raw("{", "application/json"), 400, "invalid_request");
    await expectApiError(
      await raw("summary=x", "application/x-www-form-urlencoded"),
      415,
      "unsupported_media_type",
    );
    const big = {
      transcript: Array.from({ length: 200 }, (_, i) => ({
        speaker: "agent",
        text: long(6000),
        offsetSeconds: i,
      })),
    };
    await expectApiError(await report(id, big), 413, "payload_too_large");
    expect(await reportedAt(id)).toBeNull();
  });

  test("the limits themselves are accepted: a transcript far over 64 KiB, 2,000 segments, 10,000-character texts", async () => {
    const id = await ongoingCall();
    const transcript = Array.from({ length: 2000 }, (_, i) => ({
      speaker: i % 2 ? "contact" : "agent",
      text: i === 0 ? long(10_000) : `segment ${i}`,
      offsetSeconds: i / 2,
    }));
    const res = await report(id, { transcript, outcome: long(64), summary: long(10_000) });
    expect(res.status).toBe(200);
    await finish(id);
    const t = await (await w.ctx.request(`/api/v1/calls/${id}/transcript`, { key: seed.liveKey })).json();
    expect(t.segments).toHaveLength(2000);
    expect(t.segments[0].text).toHaveLength(10_000);
  });
});

describe("exactly once", () => {
  test("the report and LiveKit's end sent together, 5 rounds of 20 calls: each event once, after call.ended", async () => {
    for (let round = 0; round < 5; round++) {
      const ids = await Promise.all(Array.from({ length: 20 }, () => ongoingCall()));
      // Half the calls send the report first, half the end: either may reach the database first.
      await Promise.all(
        ids.map((id, i) =>
          i % 2 ? Promise.all([report(id, FULL), finish(id)]) : Promise.all([finish(id), report(id, FULL)]),
        ),
      );
      for (const id of ids) expect(await eventsOf(id)).toEqual(ALL_EVENTS);
    }
  }, 120_000);

  /**
   * Both in flight at once, in a forced order: a connection of the test's own (outside the app's
   * pool, which the two requests need) holds the call's row (`select … for update`) while the first
   * request, then the second, start and wait for that lock; released, PostgreSQL hands the row to them
   * in the order they queued, so the second runs while the first is still committing and must see what
   * it committed.
   */
  async function heldInOrder<A, B>(id: string, first: () => Promise<A>, second: () => Promise<B>) {
    const side = postgres(w.ctx.db.url!, { max: 2, onnotice: () => {} });
    try {
      const started = await side.begin(async (holder) => {
        await holder`select id from calls where id = ${id} for update`;
        const waiting = async () => {
          const [row] = await side<{ n: number }[]>`
            select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock' and query ilike '%calls%'`;
          return row!.n;
        };
        const a = first();
        await waitUntil("the first request to wait for the call's row", async () => (await waiting()) === 1);
        const b = second();
        await waitUntil("the second request to wait behind it", async () => (await waiting()) === 2);
        // An object, not an array (which begin would await): the requests finish only after the commit.
        return { a, b };
      });
      return await Promise.all([started.a, started.b]);
    } finally {
      await side.end();
    }
  }

  // The embedded database runs one transaction at a time: a request never waits for another's row
  // lock, so there is no ordering to force there (the rounds above run on it all the same). The
  // reason is in the names, so that a skipped run says it.
  const ONLY_POSTGRES = "(PostgreSQL only: the embedded database runs one transaction at a time, no race)";
  test.skipIf(TEST_DATABASE !== "postgres")(
    `the report first, the end queued behind it: the end's transaction records the events, once ${ONLY_POSTGRES}`,
    async () => {
      const id = await ongoingCall();
      const [reported] = await heldInOrder(
        id,
        () => report(id, FULL),
        () => finish(id),
      );
      expect(reported.status).toBe(200);
      // Stored while the call was still ongoing: the report did go first.
      expect((await reported.json()).status).toBe("ongoing");
      expect(await eventsOf(id)).toEqual(ALL_EVENTS);
      const transcript = await w.ctx.request(`/api/v1/calls/${id}/transcript`, { key: seed.liveKey });
      expect(transcript.status).toBe(200);
    },
  );

  test.skipIf(TEST_DATABASE !== "postgres")(
    `the end first, the report queued behind it: the report's transaction records the events, once ${ONLY_POSTGRES}`,
    async () => {
      const id = await ongoingCall();
      const [, reported] = await heldInOrder(
        id,
        () => finish(id),
        () => report(id, FULL),
      );
      expect(reported.status).toBe(200);
      // The report saw the end it waited for.
      expect((await reported.json()).status).toBe("completed");
      expect(await eventsOf(id)).toEqual(ALL_EVENTS);
      const transcript = await w.ctx.request(`/api/v1/calls/${id}/transcript`, { key: seed.liveKey });
      expect(transcript.status).toBe(200);
    },
  );

  test("20 reports of one call at once: one is accepted, the others are 409 results_already_reported", async () => {
    const id = await ongoingCall();
    await finish(id);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => report(id, { ...FULL, summary: `report ${i}` })),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, ...Array(19).fill(409)]);
    for (const r of answers.filter((r) => r.status === 409))
      await expectApiError(r, 409, "results_already_reported");
    expect(await eventsOf(id)).toEqual([
      "call.started",
      "call.ended",
      "call.transcript_ready",
      "call.analysis_ready",
    ]);
  });
});
