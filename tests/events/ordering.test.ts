import { afterAll, beforeAll, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { refreshCampaign } from "../../src/db/campaigns.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { waitUntil } from "../helpers/wait.ts";

/**
 * Webhook deliveries are unordered, so every event's data says when its change happened: the events
 * of one object, in the order their changes happened, carry strictly increasing `data.updatedAt`, even
 * when the changes fall in one millisecond. The service's clock stands still here, so every change of
 * an object happens at the same instant: only the rule "a millisecond after the previous change" tells
 * them apart. Events are read as an integrator would, from GET /v1/events (newest first).
 */

const clock = new ManualClock("2026-11-21T09:30:00.000Z");
const NOW = clock.now().toISOString();
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext({ clock, timers: true, env: { SIMULATION_TIME_SCALE: "0.005" } });
  seed = await seedOrganization(ctx, { paidPlan: false });
});
afterAll(() => ctx.close());

interface Event {
  id: string;
  type: string;
  data: Record<string, unknown> & { updatedAt: string };
}

/** Every event of the test key's mode, oldest first (the order their changes were recorded in). */
async function eventsInOrder(): Promise<Event[]> {
  const out: Event[] = [];
  let cursor = "";
  for (;;) {
    const res = await ctx.request(`/api/v1/events?limit=100${cursor}`, { key: seed.testKey });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { data: Event[]; has_more: boolean };
    out.push(...page.data);
    if (!page.has_more) return out.reverse();
    cursor = `&starting_after=${page.data.at(-1)!.id}`;
  }
}

/** The events about the object `id`: the call, campaign or contact itself (not a call's transcript). */
const about = (events: Event[], id: string) => events.filter((e) => e.data.id === id);

function expectStrictlyIncreasing(times: string[]) {
  for (const t of times) expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  for (let i = 1; i < times.length; i++)
    expect(Date.parse(times[i]!)).toBeGreaterThan(Date.parse(times[i - 1]!));
}

async function get(path: string) {
  const res = await ctx.request(path, { key: seed.testKey });
  expect(res.status).toBe(200);
  return res.json();
}

test("the events of one simulated call carry strictly increasing updatedAt, the call's last one its own", async () => {
  const res = await ctx.request("/api/v1/calls", {
    method: "POST",
    key: seed.testKey,
    json: { agentId: seed.agent.id, to: "+33612345678" },
  });
  const created = await res.json();
  expect(created.updatedAt).toBe(created.createdAt);
  const all = await waitUntil("the call's analysis", async () => {
    const events = await eventsInOrder();
    return about(events, created.id).some((e) => e.type === "call.analysis_ready") && events;
  });
  const events = about(all, created.id);
  expect(events.map((e) => e.type)).toEqual(["call.started", "call.ended", "call.analysis_ready"]);
  const times = events.map((e) => e.data.updatedAt);
  expectStrictlyIncreasing([created.updatedAt, ...times]);
  expect(created.createdAt).toBe(NOW);
  const call = await get(`/api/v1/calls/${created.id}`);
  expect(call.updatedAt).toBe(times.at(-1));
  // The transcript is ready in the change that makes the analysis ready, after the end: it carries the
  // call's updatedAt of that change, as reading it does.
  const transcript = all.find((e) => e.type === "call.transcript_ready" && e.data.callId === created.id)!;
  expect(transcript.data.updatedAt).toBe(call.updatedAt);
  expect(Date.parse(transcript.data.updatedAt)).toBeGreaterThan(Date.parse(times[1]!));
  expect((await get(`/api/v1/calls/${created.id}/transcript`)).updatedAt).toBe(call.updatedAt);
});

test("a contact's created, updated and deleted events carry strictly increasing updatedAt", async () => {
  const created = await (
    await ctx.request("/api/v1/contacts", {
      method: "POST",
      key: seed.testKey,
      json: { phone: "+33612345678" },
    })
  ).json();
  for (const name of ["Jeanne", "Jeanne Martin"]) {
    const res = await ctx.request(`/api/v1/contacts/${created.id}`, {
      method: "PATCH",
      key: seed.testKey,
      json: { name },
    });
    expect(res.status).toBe(200);
  }
  const deleted = await (
    await ctx.request(`/api/v1/contacts/${created.id}`, { method: "DELETE", key: seed.testKey })
  ).json();
  expect(deleted).toEqual({ id: created.id, deleted: true, updatedAt: expect.any(String) });
  const events = about(await eventsInOrder(), created.id);
  expect(events.map((e) => e.type)).toEqual([
    "contact.created",
    "contact.updated",
    "contact.updated",
    "contact.deleted",
  ]);
  expect(events[0]!.data.updatedAt).toBe(NOW);
  expectStrictlyIncreasing(events.map((e) => e.data.updatedAt));
  expect(events.at(-1)!.data).toEqual(deleted);
});

test("a campaign's events and its calls' carry strictly increasing updatedAt; reading it gives the last", async () => {
  const res = await ctx.request("/api/v1/campaigns", {
    method: "POST",
    key: seed.testKey,
    json: {
      name: "Ordering",
      agentId: seed.agent.id,
      contacts: [{ phone: "+33612345001" }, { phone: "+33612345002" }, { phone: "+33612345003" }],
      concurrency: 1,
    },
  });
  expect(res.status).toBe(201);
  const campaign = await res.json();
  const events = await waitUntil("the campaign to complete", async () => {
    const all = await eventsInOrder();
    return about(all, campaign.id).some((e) => e.type === "campaign.completed") && all;
  });
  const own = about(events, campaign.id);
  expect(own.map((e) => e.type)).toEqual(["campaign.started", "campaign.completed"]);
  expectStrictlyIncreasing(own.map((e) => e.data.updatedAt));
  expect((await get(`/api/v1/campaigns/${campaign.id}`)).updatedAt).toBe(own.at(-1)!.data.updatedAt);
  // The engine's step run again (a repeated timer) changes nothing, its time included.
  const again = await refreshCampaign(ctx.deps.sql, campaign.id, { now: clock.now() });
  expect(again.updated_at.toISOString()).toBe(own.at(-1)!.data.updatedAt);
  const calls = events.filter((e) => e.type === "call.ended" && e.data.campaignId === campaign.id);
  expect(calls.length).toBe(3);
  for (const call of calls)
    expectStrictlyIncreasing(about(events, String(call.data.id)).map((e) => e.data.updatedAt));
});

test("knowledge.document_ready carries its document's createdAt", async () => {
  const res = await ctx.request(`/api/v1/knowledge-bases/${seed.kb.id}/documents`, {
    method: "POST",
    key: seed.testKey,
    json: { title: "Hours", text: "Open 9 to 5." },
  });
  expect(res.status).toBe(201);
  const { documentId } = await res.json();
  const event = (await eventsInOrder()).find((e) => e.data.documentId === documentId)!;
  expect(event.type).toBe("knowledge.document_ready");
  expect(event.data.createdAt).toBe(NOW);
});
