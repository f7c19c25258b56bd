import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { VoiceService, VoiceServiceError } from "voice-service/client";
import { waitUntil } from "../helpers/wait.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../helpers/webhookReceiver.ts";
import { type ClientWorld, rejection, startClientWorld } from "./support.ts";

/**
 * Every resource of the client, at least one call each, through a started server: what the client
 * sends is what the API takes, and what it returns is the API's answer, typed.
 */

let world: ClientWorld;
let receiver: WebhookReceiver;
let test_: VoiceService;
let live: VoiceService;
beforeAll(async () => {
  world = await startClientWorld({ timers: true });
  receiver = startWebhookReceiver();
  test_ = world.client(world.seed.testKey);
  live = world.client(world.seed.liveKey);
});
afterAll(async () => {
  receiver.stop();
  await world.close();
});

async function expectError(promise: Promise<unknown>, status: number, code: string) {
  const err = await rejection(promise);
  expect(err).toBeInstanceOf(VoiceServiceError);
  expect({ status: (err as VoiceServiceError).status, code: (err as VoiceServiceError).code }).toEqual({
    status,
    code,
  });
}

test("agents: list and get", async () => {
  const { agents } = await test_.agents.list();
  expect(agents.map((a) => a.id)).toEqual([world.seed.agent.id]);
  const agent = await test_.agents.get(world.seed.agent.id);
  expect(agent).toMatchObject({ id: world.seed.agent.id, name: "Reception", active: true });
});

describe("calls", () => {
  test("create, get, list, then the transcript once the simulated call completed", async () => {
    const call = await test_.calls.create({ agentId: world.seed.agent.id, to: "+33612345678" });
    expect(call).toMatchObject({ livemode: false, status: "initiated", to: "+33612345678" });
    expect((await test_.calls.get(call.id)).id).toBe(call.id);
    const listed = await test_.calls.list({ agentId: world.seed.agent.id }).toArray();
    expect(listed.map((c) => c.id)).toContain(call.id);
    const done = await waitUntil("the call to complete", async () => {
      const now = await test_.calls.get(call.id);
      return now.status === "completed" && now;
    });
    expect(done.durationSeconds).toBeGreaterThan(0);
    const transcript = await waitUntil("the transcript", () =>
      test_.calls.transcript(call.id).catch((err) => {
        if (err instanceof VoiceServiceError && err.code === "not_found") return null;
        throw err;
      }),
    );
    expect(transcript).toMatchObject({ callId: call.id, livemode: false });
    expect(transcript.segments.length).toBeGreaterThan(0);
    // A simulated call has no recording, and its results come from the simulation, not a report.
    await expectError(test_.calls.recording(call.id), 404, "not_found");
    await expectError(test_.calls.reportResults(call.id, { summary: "x" }), 403, "test_mode_not_supported");
  });
});

test("campaigns: create, get, list, cancel", async () => {
  const campaign = await test_.campaigns.create({
    name: "Spring",
    agentId: world.seed.agent.id,
    contacts: [{ phone: "+33612345678" }, { phone: "+33612345679", name: "Claire" }],
  });
  expect(campaign).toMatchObject({ name: "Spring", livemode: false, concurrency: 5, maxAttempts: 2 });
  expect((await test_.campaigns.get(campaign.id)).progress.total).toBe(2);
  expect((await test_.campaigns.list({ limit: 10 }).page()).data.map((c) => c.id)).toContain(campaign.id);
  const cancelled = await test_.campaigns.cancel(campaign.id);
  expect(cancelled.id).toBe(campaign.id);
  expect(["cancelled", "completed"]).toContain(cancelled.status);
});

test("tasks: list and delete (live keys only)", async () => {
  expect(await live.tasks.list()).toEqual({ tasks: [] });
  await expectError(live.tasks.delete("task_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"), 404, "not_found");
  await expectError(test_.tasks.list(), 403, "test_mode_not_supported");
});

test("blocked numbers: create, list, delete", async () => {
  const blocked = await test_.blockedNumbers.create({ phone: "+33612340000", reason: "asked" });
  expect(blocked).toMatchObject({ phone: "+33612340000", reason: "asked", livemode: false });
  const listed = await test_.blockedNumbers.list({ phone: "+33612340000" }).toArray();
  expect(listed.map((b) => b.id)).toEqual([blocked.id]);
  expect(await test_.blockedNumbers.delete(blocked.id)).toEqual({ id: blocked.id, deleted: true });
});

test("contacts: create, get, list, update, delete", async () => {
  const contact = await test_.contacts.create({ phone: "+33611112222", name: "Ada" });
  expect((await test_.contacts.get(contact.id)).name).toBe("Ada");
  const found = await test_.contacts.list({ phone: "+33611112222" }).toArray();
  expect(found.map((c) => c.id)).toEqual([contact.id]);
  const updated = await test_.contacts.update(contact.id, { email: "ada@example.com" });
  expect(updated).toMatchObject({ id: contact.id, email: "ada@example.com", name: "Ada" });
  const deleted = await test_.contacts.delete(contact.id);
  expect(deleted).toEqual({ id: contact.id, deleted: true, updatedAt: expect.any(String) });
  expect(deleted.updatedAt > updated.updatedAt).toBe(true);
  await expectError(test_.contacts.get(contact.id), 404, "not_found");
});

test("knowledge bases: documents create, list, get, delete, and search", async () => {
  const kb = world.seed.kb.id;
  const created = await live.knowledgeBases.documents.create(kb, {
    title: "Opening hours",
    text: "We are open on Saturday from nine to noon.",
  });
  expect(created).toMatchObject({ livemode: true });
  const documents = await live.knowledgeBases.documents.list(kb).toArray();
  expect(documents.map((d) => d.id)).toEqual([created.documentId]);
  const document = await live.knowledgeBases.documents.get(kb, created.documentId);
  expect(document).toMatchObject({
    title: "Opening hours",
    text: "We are open on Saturday from nine to noon.",
  });
  const found = await live.knowledgeBases.search(kb, { q: "Saturday", limit: 3 });
  expect(found.results.map((r) => r.documentId)).toEqual([created.documentId]);
  expect(await live.knowledgeBases.documents.delete(kb, created.documentId)).toEqual({
    id: created.documentId,
    deleted: true,
  });
  expect((await live.knowledgeBases.search(kb, { q: "Saturday" })).results).toEqual([]);
});

test("webhook endpoints and events: create, get, list, update, rotate, deliveries, redeliver, delete", async () => {
  const endpoint = await test_.webhookEndpoints.create({
    url: receiver.url("/resources"),
    events: ["contact.created"],
  });
  expect(endpoint.secret).toStartWith("whsec_");
  expect((await test_.webhookEndpoints.get(endpoint.id)).url).toBe(receiver.url("/resources"));
  expect((await test_.webhookEndpoints.list().toArray()).map((e) => e.id)).toContain(endpoint.id);

  const contact = await test_.contacts.create({ phone: "+33633334444" });
  const [event] = await test_.events.list({ type: "contact.created", limit: 1 }).toArray();
  expect(event).toMatchObject({ type: "contact.created", data: { id: contact.id } });
  const delivery = await waitUntil("the delivery to succeed", async () => {
    const [first] = await test_.webhookEndpoints.deliveries(endpoint.id).toArray();
    return first?.status === "succeeded" && first;
  });
  expect(delivery.eventId).toBe(event!.id);
  const redelivery = await test_.events.redeliver(event!.id);
  expect(redelivery.eventId).toBe(event!.id);
  expect(redelivery.deliveries).toHaveLength(1);

  const rotated = await test_.webhookEndpoints.rotateSecret(endpoint.id);
  expect(rotated.secret).not.toBe(endpoint.secret);
  const disabled = await test_.webhookEndpoints.update(endpoint.id, { enabled: false });
  expect(disabled.enabled).toBe(false);
  expect(await test_.webhookEndpoints.delete(endpoint.id)).toEqual({ id: endpoint.id, deleted: true });
});

test("web calls: a session token minted with a secret key starts a call with no key at all", async () => {
  const session = await test_.webCallSessions.create({ agentId: world.seed.agent.id });
  expect(session).toMatchObject({ livemode: false });
  const browser = new VoiceService({ baseUrl: world.baseUrl });
  const started = await browser.webCalls.start({ sessionToken: session.token });
  expect(started).toMatchObject({ simulated: true, livemode: false });
  // The token is single-use.
  await expectError(browser.webCalls.start({ sessionToken: session.token }), 401, "invalid_session_token");
});

test("minting sends an Idempotency-Key: the same key replays the same token, none given mints a new one", async () => {
  const body = { agentId: world.seed.agent.id, variables: { firstName: "Ada" } };
  const idempotencyKey = `order-${crypto.randomUUID()}`;
  const first = await test_.webCallSessions.create(body, { idempotencyKey });
  const replay = await test_.webCallSessions.create(body, { idempotencyKey });
  expect(replay).toEqual(first);
  const fresh = await test_.webCallSessions.create(body);
  const another = await test_.webCallSessions.create(body);
  expect(new Set([first.token, fresh.token, another.token]).size).toBe(3);
});
