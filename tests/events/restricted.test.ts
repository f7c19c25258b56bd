import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { waitUntil } from "../helpers/wait.ts";

/**
 * A key restricted to some agents lists only the events whose object belongs to one of them (calls,
 * their transcripts and analyses, campaigns), never the organization-wide ones (contacts, knowledge).
 */

// biome-ignore lint/suspicious/noExplicitAny: JSON answers are read freely, as a client would
type Json = any;

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let mineKey = "";
let otherAgentId = "";
beforeAll(async () => {
  ctx = await createTestContext({ timers: true });
  seed = await seedOrganization(ctx);
  otherAgentId = (await createAgent(ctx.deps, seed.org.id, { name: "Other" })).id;
  mineKey = (
    await createSecretKey(ctx.deps, seed.org.id, { mode: "test", scopes: ["*"], agentIds: [seed.agent.id] })
  ).key;
});
afterAll(() => ctx.close());

async function events(key: string, query = ""): Promise<Json[]> {
  const out: Json[] = [];
  let cursor = "";
  for (;;) {
    const res = await ctx.request(`/api/v1/events?limit=2${query}${cursor}`, { key });
    expect(res.status).toBe(200);
    const page = await res.json();
    out.push(...page.data);
    if (!page.has_more) return out;
    cursor = `&starting_after=${page.data.at(-1).id}`;
  }
}

/** A simulated call of `agentId` played to its end: call.started, call.ended, transcript, analysis. */
async function playCall(agentId: string): Promise<string> {
  const res = await ctx.request("/api/v1/calls", {
    method: "POST",
    key: seed.testKey,
    json: { agentId, to: "+33612345678" },
  });
  expect(res.status).toBe(201);
  const { id } = await res.json();
  await waitUntil(
    "the call's four events",
    async () => {
      const all = await events(seed.testKey, "");
      const mine = all.filter((e) => (e.data.id ?? e.data.callId) === id);
      return mine.length === 4 ? true : undefined;
    },
    { timeoutMs: 30_000 },
  );
  return id;
}

describe("GET /v1/events with a key restricted to some agents", () => {
  let mineCall = "";
  let otherCall = "";
  beforeAll(async () => {
    mineCall = await playCall(seed.agent.id);
    otherCall = await playCall(otherAgentId);
    const res = await ctx.request("/api/v1/contacts", {
      method: "POST",
      key: seed.testKey,
      json: { phone: "+33612345678" },
    });
    expect(res.status).toBe(201);
  });

  test("lists its agents' call events (transcript and analysis included), nothing else", async () => {
    const all = await events(seed.testKey);
    const restricted = await events(mineKey);
    const objectOf = (e: Json) => e.data.id ?? e.data.callId;
    expect(restricted.map((e) => e.id)).toEqual(all.filter((e) => objectOf(e) === mineCall).map((e) => e.id));
    expect(restricted.map((e) => e.type).sort()).toEqual(
      ["call.analysis_ready", "call.ended", "call.started", "call.transcript_ready"].sort(),
    );
    expect(all.some((e) => objectOf(e) === otherCall)).toBe(true);
    expect(all.some((e) => e.type === "contact.created")).toBe(true);
    // With a type filter too.
    const ended = await events(mineKey, "&type=call.ended");
    expect(ended.map((e) => objectOf(e))).toEqual([mineCall]);
    expect(await events(mineKey, "&type=contact.created")).toEqual([]);
  });

  test("another agent's event is not a cursor of its list", async () => {
    const all = await events(seed.testKey);
    const foreign = all.find((e) => (e.data.id ?? e.data.callId) === otherCall);
    const res = await ctx.request(`/api/v1/events?starting_after=${foreign.id}`, { key: mineKey });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: "invalid_cursor", param: "starting_after" });
  });

  test("the agent is written with the event (an indexed column), null for the organization's own objects", async () => {
    const rows = await ctx.deps.sql<{ type: string; agent_id: string | null }[]>`
      select type, agent_id from events where organization_id = ${seed.org.id}`;
    for (const r of rows) {
      if (r.type.startsWith("contact.")) expect(r.agent_id).toBeNull();
      else expect([seed.agent.id, otherAgentId]).toContain(r.agent_id!);
    }
  });
});

describe("campaigns, contacts and knowledge, for a key restricted to some agents", () => {
  let mine: string[] = [];
  let others = "";
  beforeAll(async () => {
    const campaign = async (agentId: string) => {
      const res = await ctx.request("/api/v1/campaigns", {
        method: "POST",
        key: seed.testKey,
        json: { name: "Reminders", agentId, contacts: [{ phone: "+33612345670" }] },
      });
      expect(res.status).toBe(201);
      return (await res.json()).id as string;
    };
    // Its agent's campaigns: one played to its end, one cancelled; another agent's, played out.
    const done = await campaign(seed.agent.id);
    const cancelled = await campaign(seed.agent.id);
    const cancel = await ctx.request(`/api/v1/campaigns/${cancelled}/cancel`, {
      method: "POST",
      key: seed.testKey,
    });
    expect(cancel.status).toBe(200);
    others = await campaign(otherAgentId);
    mine = [done, cancelled];
    await waitUntil(
      "both played campaigns to complete",
      async () => {
        const all = await events(seed.testKey, "&type=campaign.completed");
        return [done, others].every((id) => all.some((e) => e.data.id === id)) ? true : undefined;
      },
      { timeoutMs: 30_000 },
    );
    // Organization-wide events: a contact created, changed and deleted, and a document.
    const contact = await ctx.request("/api/v1/contacts", {
      method: "POST",
      key: seed.testKey,
      json: { phone: "+33612345679" },
    });
    const { id } = await contact.json();
    await ctx.request(`/api/v1/contacts/${id}`, {
      method: "PATCH",
      key: seed.testKey,
      json: { name: "Ada" },
    });
    await ctx.request(`/api/v1/contacts/${id}`, { method: "DELETE", key: seed.testKey });
    const document = await ctx.request(`/api/v1/knowledge-bases/${seed.kb.id}/documents`, {
      method: "POST",
      key: seed.testKey,
      json: { title: "Hours", text: "Open from nine to five." },
    });
    expect(document.status).toBe(201);
  });

  test("its agents' campaign events are listed; another agent's, contacts' and knowledge's never", async () => {
    const all = await events(seed.testKey);
    const restricted = await events(mineKey);
    const campaignEvents = (list: Json[]) =>
      list.filter((e) => e.type.startsWith("campaign.")).map((e) => `${e.type} ${e.data.id}`);
    // Every organization-wide event exists, for an unrestricted key.
    for (const type of [
      "contact.created",
      "contact.updated",
      "contact.deleted",
      "knowledge.document_ready",
    ]) {
      expect(all.some((e) => e.type === type)).toBe(true);
    }
    expect(campaignEvents(restricted).sort()).toEqual(
      [
        `campaign.started ${mine[0]}`,
        `campaign.completed ${mine[0]}`,
        `campaign.started ${mine[1]}`,
        `campaign.cancelled ${mine[1]}`,
      ].sort(),
    );
    expect(campaignEvents(all)).toContain(`campaign.completed ${others}`);
    expect(
      restricted.filter((e) => e.type.startsWith("contact.") || e.type.startsWith("knowledge.")),
    ).toEqual([]);
    for (const type of ["campaign.started", "contact.created", "knowledge.document_ready"]) {
      const typed = await events(mineKey, `&type=${type}`);
      expect(typed.map((e) => e.data.id)).toEqual(type === "campaign.started" ? [mine[1], mine[0]] : []);
    }
  });

  test("the events list's OpenAPI description says so", async () => {
    const document = await (await ctx.request("/api/openapi.json")).json();
    const description: string = document.paths["/api/v1/events"].get.description;
    expect(description).toContain("restricted to some agents");
    for (const named of ["campaigns", "`contact.*`", "`knowledge.document_ready`", "unrestricted key"]) {
      expect(description).toContain(named);
    }
  });
});
