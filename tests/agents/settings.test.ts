import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { runAdmin } from "../../src/cli/admin.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createKnowledgeBase } from "../../src/services/knowledgeBases.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { ADMIN_TOKEN, admin, count, createAdminTestContext } from "../admin/support.ts";
import { seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/** What a voice agent reads about itself: settings set by operators, read with `GET /v1/agents/{id}`. */

setDefaultTimeout(60_000);

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let otherOrgKb: string;

beforeAll(async () => {
  ctx = await createAdminTestContext();
  seed = await seedOrganization(ctx);
  const other = await createOrganization(ctx.deps, { name: "Other", paidPlan: false, planMinutes: 0 });
  otherOrgKb = (await createKnowledgeBase(ctx.deps, other.id, { name: "Theirs" })).id;
});
afterAll(() => ctx.close());

const AGENT_KEYS = [
  "active",
  "createdAt",
  "greeting",
  "id",
  "instructions",
  "knowledgeBaseIds",
  "language",
  "livekitAgentName",
  "name",
];

async function readAgent(id: string, key = seed.liveKey) {
  const res = await ctx.request(`/api/v1/agents/${id}`, { key });
  return { status: res.status, body: await res.json() };
}

describe("admin API", () => {
  test("an agent is created with its language, instructions, greeting and knowledge bases", async () => {
    const second = await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Prices" });
    const { status, body } = await admin(ctx, "POST", `/organizations/${seed.org.id}/agents`, {
      json: {
        name: "Accueil",
        language: "fr-ca",
        instructions: "Tu prends les rendez-vous.",
        greeting: "Bonjour !",
        knowledgeBaseIds: [seed.kb.id, second.id, seed.kb.id],
      },
    });
    expect(status).toBe(201);
    // The tag is canonicalised; a repeated knowledge base counts once.
    expect(body).toMatchObject({
      organizationId: seed.org.id,
      language: "fr-CA",
      instructions: "Tu prends les rendez-vous.",
      greeting: "Bonjour !",
      knowledgeBaseIds: [seed.kb.id, second.id],
    });
    const read = await readAgent(body.id);
    expect(read.status).toBe(200);
    const { organizationId: _, ...publicView } = body;
    expect(read.body).toEqual(publicView);
  });

  test("defaults: language en, no instructions, no greeting, no knowledge base", async () => {
    const { body } = await admin(ctx, "POST", `/organizations/${seed.org.id}/agents`, {
      json: { name: "Plain" },
    });
    expect(body).toMatchObject({ language: "en", instructions: null, greeting: null, knowledgeBaseIds: [] });
  });

  test("the longest instructions and greeting are accepted", async () => {
    const { status, body } = await admin(ctx, "POST", `/organizations/${seed.org.id}/agents`, {
      json: { name: "Long", instructions: "i".repeat(20_000), greeting: "g".repeat(1_000) },
    });
    expect(status).toBe(201);
    expect(body.instructions).toHaveLength(20_000);
    expect(body.greeting).toHaveLength(1_000);
  });

  test.each([
    ["of another organization", () => otherOrgKb],
    ["unknown", () => "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
    ["malformed", () => "kb_nope"],
    ["of another type", () => seed.agent.id],
  ])(
    "a knowledge base %s is 404 not_found with param knowledgeBaseIds; nothing is written",
    async (_n, kb) => {
      const before = await count(ctx, "agents");
      const created = await admin(ctx, "POST", `/organizations/${seed.org.id}/agents`, {
        json: { name: "X", knowledgeBaseIds: [seed.kb.id, kb()] },
      });
      expect(created.status).toBe(404);
      expect(created.body.error).toMatchObject({ code: "not_found", param: "knowledgeBaseIds" });
      expect(await count(ctx, "agents")).toBe(before);

      const patched = await admin(ctx, "PATCH", `/agents/${seed.agent.id}`, {
        json: { knowledgeBaseIds: [kb()], greeting: "changed" },
      });
      expect(patched.status).toBe(404);
      expect(patched.body.error).toMatchObject({ code: "not_found", param: "knowledgeBaseIds" });
      expect((await readAgent(seed.agent.id)).body).toMatchObject({ greeting: null, knowledgeBaseIds: [] });
    },
  );

  test("PATCH sets, keeps and clears each setting", async () => {
    const agent = await createAgent(ctx.deps, seed.org.id, { name: "Patchy" });
    const set = await admin(ctx, "PATCH", `/agents/${agent.id}`, {
      json: {
        language: "pt-br",
        instructions: "Be brief.",
        greeting: "Olá!",
        knowledgeBaseIds: [seed.kb.id],
      },
    });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({
      ...agent,
      language: "pt-BR",
      instructions: "Be brief.",
      greeting: "Olá!",
      knowledgeBaseIds: [seed.kb.id],
    });
    const kept = await admin(ctx, "PATCH", `/agents/${agent.id}`, { json: { name: "Patched" } });
    expect(kept.body).toEqual({ ...set.body, name: "Patched" });
    const cleared = await admin(ctx, "PATCH", `/agents/${agent.id}`, {
      json: { instructions: null, greeting: null, knowledgeBaseIds: [] },
    });
    expect(cleared.body).toEqual({ ...kept.body, instructions: null, greeting: null, knowledgeBaseIds: [] });
  });

  test('an empty instructions or greeting is stored as null, at creation and by PATCH (as the CLI\'s "")', async () => {
    const created = await admin(ctx, "POST", `/organizations/${seed.org.id}/agents`, {
      json: { name: "Blank", instructions: "", greeting: "" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ instructions: null, greeting: null });
    const id = created.body.id;
    const set = await admin(ctx, "PATCH", `/agents/${id}`, {
      json: { instructions: "Be kind.", greeting: "Hi!" },
    });
    expect(set.body).toMatchObject({ instructions: "Be kind.", greeting: "Hi!" });
    const cleared = await admin(ctx, "PATCH", `/agents/${id}`, { json: { instructions: "", greeting: "" } });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toEqual({ ...set.body, instructions: null, greeting: null });
    expect((await readAgent(id)).body).toMatchObject({ instructions: null, greeting: null });
    // Blank but not empty is text the operator typed: kept as it is.
    const spaces = await admin(ctx, "PATCH", `/agents/${id}`, { json: { greeting: " " } });
    expect(spaces.body.greeting).toBe(" ");
  });

  test("PATCH of an unknown agent with knowledge bases is 404 for the agent", async () => {
    const res = await admin(ctx, "PATCH", "/agents/agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", {
      json: { knowledgeBaseIds: [seed.kb.id] },
    });
    expect(res.status).toBe(404);
    expect(res.body.error.param).toBeUndefined();
  });
});

describe("CLI", () => {
  async function ok(...argv: string[]) {
    const r = await runAdmin(argv, ctx.deps);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
    return JSON.parse(r.stdout);
  }

  test("create-agent and update-agent take the settings as flags", async () => {
    const agent = await ok(
      "create-agent",
      "--organization",
      seed.org.id,
      "--name",
      "Shell",
      "--language",
      "FR",
      "--instructions",
      "Prends les messages.",
      "--greeting",
      "Allô ?",
      "--knowledge-bases",
      seed.kb.id,
    );
    expect(agent).toMatchObject({
      language: "fr",
      instructions: "Prends les messages.",
      greeting: "Allô ?",
      knowledgeBaseIds: [seed.kb.id],
    });
    const cleared = await ok("update-agent", agent.id, "--greeting", "", "--knowledge-bases", "");
    expect(cleared).toEqual({ ...agent, greeting: null, knowledgeBaseIds: [] });

    const cleared2 = await ok("update-agent", agent.id, "--instructions", "");
    expect(cleared2).toEqual({ ...cleared, instructions: null });

    const refused = await runAdmin(["update-agent", agent.id, "--knowledge-bases", otherOrgKb], ctx.deps);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stderr).error).toMatchObject({ code: "not_found", param: "knowledgeBaseIds" });
  });
});

describe("the admin API and the CLI agree", () => {
  test('"" for instructions and greeting: null both ways, at creation and on update', async () => {
    const fromCli = JSON.parse(
      (
        await runAdmin(
          [
            "create-agent",
            "--organization",
            seed.org.id,
            "--name",
            "Both",
            "--instructions",
            "",
            "--greeting",
            "",
          ],
          ctx.deps,
        )
      ).stdout,
    );
    const fromApi = (
      await admin(ctx, "POST", `/organizations/${seed.org.id}/agents`, {
        json: { name: "Both", instructions: "", greeting: "" },
      })
    ).body;
    const settings = (a: Record<string, unknown>) => ({ instructions: a.instructions, greeting: a.greeting });
    expect(settings(fromCli)).toEqual({ instructions: null, greeting: null });
    expect(settings(fromApi)).toEqual(settings(fromCli));

    for (const agent of [fromCli, fromApi]) {
      await admin(ctx, "PATCH", `/agents/${agent.id}`, { json: { instructions: "x", greeting: "y" } });
    }
    const viaCli = JSON.parse(
      (await runAdmin(["update-agent", fromCli.id, "--instructions", "", "--greeting", ""], ctx.deps)).stdout,
    );
    const viaApi = (
      await admin(ctx, "PATCH", `/agents/${fromApi.id}`, { json: { instructions: "", greeting: "" } })
    ).body;
    expect(settings(viaCli)).toEqual({ instructions: null, greeting: null });
    expect(settings(viaApi)).toEqual(settings(viaCli));
  });
});

describe("GET /api/v1/agents/{id}", () => {
  test("the agent object, exactly; test and live keys read the same agent", async () => {
    const live = await readAgent(seed.agent.id);
    expect(live.status).toBe(200);
    expect(Object.keys(live.body).sort()).toEqual(AGENT_KEYS);
    const test = await readAgent(seed.agent.id, seed.testKey);
    expect(test).toEqual(live);
  });

  test("list items carry the same object", async () => {
    const res = await ctx.request("/api/v1/agents", { key: seed.liveKey });
    const { agents } = await res.json();
    const mine = agents.find((a: { id: string }) => a.id === seed.agent.id);
    expect(mine).toEqual((await readAgent(seed.agent.id)).body);
    for (const a of agents) expect(Object.keys(a).sort()).toEqual(AGENT_KEYS);
  });

  test("outside the key's agent restriction, of another organization, unknown or malformed: 404", async () => {
    const other = await createAgent(ctx.deps, seed.org.id, { name: "Restricted away" });
    const restricted = await createSecretKey(ctx.deps, seed.org.id, {
      mode: "live",
      scopes: ["agents:read"],
      agentIds: [other.id],
    });
    expect((await readAgent(other.id, restricted.key)).status).toBe(200);
    const foreignOrg = await createOrganization(ctx.deps, { name: "F", paidPlan: false, planMinutes: 0 });
    const foreign = await createAgent(ctx.deps, foreignOrg.id, { name: "Theirs" });
    for (const [id, key] of [
      [seed.agent.id, restricted.key],
      [foreign.id, seed.liveKey],
      ["agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", seed.liveKey],
      ["agt_x", seed.liveKey],
      [seed.kb.id, seed.liveKey],
    ] as const) {
      await expectApiError(await ctx.request(`/api/v1/agents/${id}`, { key }), 404, "not_found");
    }
    // The document says so, as it does for calls.
    const doc = await (await ctx.request("/api/openapi.json")).json();
    expect(doc.paths["/api/v1/agents/{id}"].get.description).toContain(
      "for a key restricted to some agents, every other agent of the organization",
    );
  });

  test("the admin token is no secret key", async () => {
    const res = await ctx.request(`/api/v1/agents/${seed.agent.id}`, { key: ADMIN_TOKEN });
    expect(res.status).toBe(401);
  });
});

describe("the language of simulated content", () => {
  async function simulatedLanguage(language: string, variables: Record<string, unknown> = {}) {
    const agent = await createAgent(ctx.deps, seed.org.id, { name: `Speaks ${language}`, language });
    const res = await ctx.request("/api/v1/calls", {
      method: "POST",
      key: seed.testKey,
      json: { agentId: agent.id, to: "+33612345678", variables },
    });
    expect(res.status).toBe(201);
    const { id } = await res.json();
    const [row] = await ctx.deps.sql<{ language: string }[]>`select language from calls where id = ${id}`;
    return row!.language;
  }

  async function tokenCallLanguage(language: string) {
    const agent = await createAgent(ctx.deps, seed.org.id, { name: `Token ${language}`, language });
    const mint = await ctx.request("/api/v1/web-call-sessions", {
      method: "POST",
      key: seed.testKey,
      json: { agentId: agent.id },
    });
    const { token } = await mint.json();
    const res = await ctx.request("/api/v1/web-calls", {
      method: "POST",
      json: { sessionToken: token },
      remoteAddress: `203.0.113.${Math.floor(Math.random() * 250) + 1}`,
    });
    expect(res.status).toBe(201);
    const { callId } = await res.json();
    const [row] = await ctx.deps.sql<{ language: string }[]>`select language from calls where id = ${callId}`;
    return row!.language;
  }

  test.each([
    ["fr", "fr"],
    ["fr-CA", "fr"],
    ["fr-BE", "fr"],
    ["en-GB", "en"],
    ["de", "en"],
    ["fy", "en"],
  ])("an agent speaking %s plays %s content", async (tag, content) => {
    expect(await simulatedLanguage(tag)).toBe(content);
    expect(await tokenCallLanguage(tag)).toBe(content);
  });

  test("the `language` variable still wins", async () => {
    expect(await simulatedLanguage("fr-CA", { language: "en" })).toBe("en");
    expect(await simulatedLanguage("de", { language: "fr" })).toBe("fr");
  });
});
