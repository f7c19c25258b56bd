import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectApiError } from "../helpers/errors.ts";
import { type DialScript, liveKitEvents } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  freshNumber,
  type PhoneSeed,
  type PhoneWorld,
  placeCall,
  seedPhoneOrganization,
  startPhoneWorld,
} from "./support.ts";

/**
 * The results a live phone call's voice agent reports: accepted once the callee answered, before or
 * after the end (the callee hanging up, the room finished, or maxSeconds), and their events recorded
 * once, when both the end and the report are in; refused for a call that never started.
 */

let w: PhoneWorld;
let seed: PhoneSeed;

beforeAll(async () => {
  w = await startPhoneWorld({ timers: true });
  seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 1000 }, { planMinutes: 100_000 });
}, 60_000);
afterAll(() => w.close());

const SEGMENTS = [
  { speaker: "agent", text: "Hello, this is the pharmacy calling about your order.", offsetSeconds: 0.5 },
  { speaker: "contact", text: "Yes, can I pick it up tomorrow?", offsetSeconds: 4.2 },
  { speaker: "agent", text: "It will be ready from nine.", offsetSeconds: 7 },
];
const RESULTS = {
  transcript: SEGMENTS,
  summary: "The order will be picked up tomorrow from 9:00.",
  collectedData: { pickup: "tomorrow" },
  successful: true,
  outcome: "pickup_confirmed",
};
const ALL_EVENTS = ["call.started", "call.ended", "call.transcript_ready", "call.analysis_ready"];

const sql = () => w.ctx.deps.sql;

async function deliver(event: Record<string, unknown>) {
  const { body, headers } = await w.liveKit.signWebhook(event);
  const res = await w.ctx.request("/api/livekit/webhook", { method: "POST", body, headers });
  expect(res.status).toBe(200);
}
async function status(id: string): Promise<string> {
  const [r] = await sql()<{ status: string }[]>`select status from calls where id = ${id}`;
  return r!.status;
}
const settled = (id: string, expected: string) =>
  waitUntil(`the call to be ${expected}`, async () => (await status(id)) === expected);

/** The call's events, oldest first, as `type`. */
async function eventsOf(id: string): Promise<string[]> {
  const rows = await sql()<{ type: string }[]>`
    select type from events where data->>'id' = ${id} or data->>'callId' = ${id} order by id`;
  return rows.map((r) => r.type);
}
async function reportedAt(id: string) {
  const [r] = await sql()<{ results_reported_at: Date | null }[]>`
    select results_reported_at from calls where id = ${id}`;
  return r!.results_reported_at;
}
function report(id: string, json: unknown = RESULTS) {
  return w.ctx.request(`/api/v1/calls/${id}/results`, { method: "POST", key: seed.liveKey, json });
}
const transcriptOf = (id: string) => w.ctx.request(`/api/v1/calls/${id}/transcript`, { key: seed.liveKey });
/** The transcript once the results are ready: the segments reported, with the call's latest updatedAt. */
async function expectTranscript(id: string) {
  const transcript = await transcriptOf(id);
  expect(transcript.status).toBe(200);
  const call = await (await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.liveKey })).json();
  expect(await transcript.json()).toEqual({
    callId: id,
    livemode: true,
    segments: SEGMENTS,
    updatedAt: call.updatedAt,
  });
}

/** A live phone call dialled with `script`. */
async function dialled(script: DialScript, extra: Record<string, unknown> = {}): Promise<string> {
  const to = freshNumber();
  w.liveKit.scriptDial(to, script);
  const res = await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to, ...extra });
  expect(res.status).toBe(201);
  return (await res.json()).id as string;
}

/** A live phone call the callee answered: `ongoing`. */
async function answered(): Promise<string> {
  const id = await dialled({ kind: "answer", afterMs: 50 });
  await settled(id, "ongoing");
  return id;
}

/** The three ends of an answered phone call; each leaves it `completed` (awaited). */
const ENDS: [name: string, end: (id: string) => Promise<void>][] = [
  [
    "the callee hanging up (participant_left of sip_<call id>)",
    (id) => deliver(liveKitEvents.participantLeft(id, `sip_${id}`)),
  ],
  ["the room finished (room_finished)", (id) => deliver(liveKitEvents.roomFinished(id))],
  [
    "maxSeconds (the server's timer)",
    async (id) => {
      await sql()`update timers set due_at = now()
        where kind = 'webcall.max_duration' and payload->>'callId' = ${id}`;
      await settled(id, "completed");
    },
  ],
];

describe.each(ENDS)("a phone call ended by %s", (_name, end) => {
  test("the report while ongoing: the events and the transcript wait for the end, then come once", async () => {
    const id = await answered();
    const res = await report(id);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      id,
      status: "ongoing",
      direction: "outbound",
      ...omitTranscript(),
    });
    expect(await eventsOf(id)).toEqual(["call.started"]);
    await expectApiError(await transcriptOf(id), 404, "not_found");

    await end(id);
    expect(await status(id)).toBe("completed");
    expect(await eventsOf(id)).toEqual(ALL_EVENTS);
    await expectTranscript(id);

    // LiveKit repeating the end and the room closing after it change nothing; a second report is refused.
    await deliver(liveKitEvents.roomFinished(id));
    await deliver(liveKitEvents.participantLeft(id, `sip_${id}`));
    await expectApiError(await report(id), 409, "results_already_reported");
    expect(await eventsOf(id)).toEqual(ALL_EVENTS);
  });

  test("the report after the end: the events come with it, once", async () => {
    const id = await answered();
    await end(id);
    expect(await eventsOf(id)).toEqual(["call.started", "call.ended"]);
    await expectApiError(await transcriptOf(id), 404, "not_found");

    const res = await report(id);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id, status: "completed", ...omitTranscript() });
    expect(await eventsOf(id)).toEqual(ALL_EVENTS);
    await expectTranscript(id);
    await expectApiError(await report(id), 409, "results_already_reported");
    expect(await eventsOf(id)).toEqual(ALL_EVENTS);
  });
});

/** What the call object shows of the results (the transcript is read on its own). */
function omitTranscript() {
  const { transcript: _, ...shown } = RESULTS;
  return shown;
}

describe("a phone call that never started is 409 call_not_started, and nothing is stored", () => {
  async function refused(id: string) {
    const { error } = await expectApiError(await report(id), 409, "call_not_started");
    expect(error.message).toContain(await status(id));
    expect(await reportedAt(id)).toBeNull();
    expect(await eventsOf(id)).not.toContain("call.analysis_ready");
  }

  test("scheduled (a future runAt)", async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const id = await dialled({ kind: "answer" }, { runAt });
    expect(await status(id)).toBe("scheduled");
    await refused(id);
  });

  test("ringing (dialled, not answered yet)", async () => {
    const id = await dialled({ kind: "hang" });
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${id}`) === 1);
    expect(await status(id)).toBe("ringing");
    await refused(id);
    w.liveKit.releaseDials({ kind: "sip_error", sipStatus: 486 });
    await settled(id, "busy");
  });

  test.each([
    ["busy (486 Busy Here)", { kind: "sip_error", sipStatus: 486 } as const, "busy"],
    ["no_answer (480 Temporarily Unavailable)", { kind: "sip_error", sipStatus: 480 } as const, "no_answer"],
    ["no_answer (the ringing timeout)", { kind: "ring_timeout" } as const, "no_answer"],
  ])("ended %s", async (_name, script, ended) => {
    const id = await dialled(script);
    await settled(id, ended);
    await refused(id);
    expect(await eventsOf(id)).toEqual(["call.ended"]);
  });
});
