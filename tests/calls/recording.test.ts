import { afterAll, beforeAll, expect, test } from "bun:test";
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

/** `GET /v1/calls/{id}/recording`: the URL the voice agent reported, for live calls only. */

let w: WebCallWorld;
let seed: Seed;

beforeAll(async () => {
  w = await startWorld({ timers: true });
  seed = await seedOrganization(w.ctx, { planMinutes: 10_000, cap: 10_000 });
});
afterAll(() => w.close());

const URL_ = "https://recordings.example.com/calls/a.ogg?sig=abc";

async function ongoingCall(): Promise<string> {
  const token = await mintToken(w.ctx, seed.liveKey, seed.agent.id);
  const res = await startCall(w.ctx, { sessionToken: token });
  const { callId } = await res.json();
  const { body, headers } = await w.liveKit.signWebhook(liveKitEvents.participantJoined(callId, "visitor"));
  await w.ctx.request("/api/livekit/webhook", { method: "POST", body, headers });
  return callId;
}

const recording = (id: string, key = seed.liveKey) => w.ctx.request(`/api/v1/calls/${id}/recording`, { key });

async function expectNotFound(res: Response) {
  expect(res.status).toBe(404);
  expect((await res.json()).error.code).toBe("not_found");
}

test("200 with the reported URL, the same as the call's recordingUrl", async () => {
  const id = await ongoingCall();
  await expectNotFound(await recording(id));
  const reported = await w.ctx.request(`/api/v1/calls/${id}/results`, {
    method: "POST",
    key: seed.liveKey,
    json: { recordingUrl: URL_ },
  });
  expect(reported.status).toBe(200);
  const res = await recording(id);
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ callId: id, livemode: true, url: URL_ });
  const call = await (await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.liveKey })).json();
  expect(call.recordingUrl).toBe(URL_);
  // The other mode never reads it.
  await expectNotFound(await recording(id, seed.testKey));
});

test("results without a recording: 404", async () => {
  const id = await ongoingCall();
  await w.ctx.request(`/api/v1/calls/${id}/results`, {
    method: "POST",
    key: seed.liveKey,
    json: { summary: "s" },
  });
  await expectNotFound(await recording(id));
});

test("a simulated call has none, even once completed; malformed and unknown ids are 404", async () => {
  const res = await w.ctx.request("/api/v1/calls", {
    method: "POST",
    key: seed.testKey,
    json: { agentId: seed.agent.id, to: "+33612345678" },
  });
  const { id } = await res.json();
  await waitUntil("the simulated call to complete", async () => {
    const call = await (await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.testKey })).json();
    return call.status === "completed";
  });
  await expectNotFound(await recording(id, seed.testKey));
  await expectNotFound(await recording(id, seed.liveKey));
  await expectNotFound(await recording("call_nope"));
  await expectNotFound(await recording("call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"));
});
