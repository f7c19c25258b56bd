import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sha256 } from "../../src/auth/keys.ts";
import type { TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { ADMIN_TOKEN, admin, count, createAdminTestContext } from "./support.ts";

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ID = (prefix: string) => new RegExp(`^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`);

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createAdminTestContext();
});
afterAll(() => ctx.close());

async function newOrganization(json: Record<string, unknown> = { name: "Acme" }) {
  const { status, body } = await admin(ctx, "POST", "/organizations", { json });
  expect(status).toBe(201);
  return body;
}
async function newAgent(orgId: string, json: Record<string, unknown> = { name: "Reception" }) {
  const { status, body } = await admin(ctx, "POST", `/organizations/${orgId}/agents`, { json });
  expect(status).toBe(201);
  return body;
}

describe("organizations", () => {
  test("POST /organizations creates one with defaults: 201 and exactly the documented fields", async () => {
    const { status, body, res } = await admin(ctx, "POST", "/organizations", { json: { name: "  Acme  " } });
    expect(status).toBe(201);
    expect(res.headers.get("x-request-id")).toMatch(ID("req"));
    expect(Object.keys(body).sort()).toEqual([
      "allowedCountries",
      "callWindow",
      "callerNumber",
      "createdAt",
      "id",
      "maxCallsPerHour",
      "maxConcurrentCalls",
      "name",
      "paidPlan",
      "planMinutes",
      "sipTrunkId",
    ]);
    expect(body).toMatchObject({
      name: "Acme",
      paidPlan: false,
      planMinutes: 0,
      sipTrunkId: null,
      callerNumber: null,
      allowedCountries: null,
      callWindow: null,
      maxConcurrentCalls: 10,
      maxCallsPerHour: 100,
    });
    expect(body.id).toMatch(ID("org"));
    expect(body.createdAt).toMatch(ISO);
  });

  test("POST /organizations with a paid plan and minutes", async () => {
    const body = await newOrganization({ name: "Paid", paidPlan: true, planMinutes: 500 });
    expect(body).toMatchObject({ name: "Paid", paidPlan: true, planMinutes: 500 });
  });

  test("PATCH /organizations/{id} changes only the given fields", async () => {
    const org = await newOrganization({ name: "Before", paidPlan: true, planMinutes: 300 });
    const renamed = await admin(ctx, "PATCH", `/organizations/${org.id}`, { json: { name: "After" } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({ ...org, name: "After" });
    const replanned = await admin(ctx, "PATCH", `/organizations/${org.id}`, {
      json: { paidPlan: false, planMinutes: 0 },
    });
    expect(replanned.status).toBe(200);
    expect(replanned.body).toEqual({ ...org, name: "After", paidPlan: false, planMinutes: 0 });
    const empty = await admin(ctx, "PATCH", `/organizations/${org.id}`, { json: {} });
    expect(empty.body).toEqual(replanned.body);
  });
});

describe("agents", () => {
  test("POST /organizations/{id}/agents creates an active agent by default", async () => {
    const org = await newOrganization();
    const { status, body } = await admin(ctx, "POST", `/organizations/${org.id}/agents`, {
      json: { name: "Reception" },
    });
    expect(status).toBe(201);
    expect(body).toMatchObject({
      organizationId: org.id,
      name: "Reception",
      active: true,
      livekitAgentName: null,
      language: "en",
    });
    expect(body.id).toMatch(ID("agt"));
    expect(body.createdAt).toMatch(ISO);
  });

  test("POST with active false, a media server name and a language", async () => {
    const org = await newOrganization();
    const agent = await newAgent(org.id, {
      name: "Nuit",
      active: false,
      livekitAgentName: "night-bot",
      language: "fr",
    });
    expect(agent).toMatchObject({ active: false, livekitAgentName: "night-bot", language: "fr" });
  });

  test("PATCH /agents/{id} deactivates, renames and clears the media server name; the public list follows", async () => {
    const org = await newOrganization();
    const agent = await newAgent(org.id, { name: "Sales", livekitAgentName: "sales-bot" });
    const key = await admin(ctx, "POST", `/organizations/${org.id}/secret-keys`, {
      json: { mode: "test", scopes: ["agents:read"] },
    });
    const patched = await admin(ctx, "PATCH", `/agents/${agent.id}`, {
      json: { active: false, name: "Sales (paused)", livekitAgentName: null },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...agent, active: false, name: "Sales (paused)", livekitAgentName: null });
    const kept = await admin(ctx, "PATCH", `/agents/${agent.id}`, { json: { language: "fr" } });
    expect(kept.body).toEqual({ ...patched.body, language: "fr" });
    const list = await ctx.request("/api/v1/agents", { key: key.body.key });
    const { organizationId, ...publicAgent } = kept.body;
    expect(organizationId).toBe(org.id);
    expect(await list.json()).toEqual({ agents: [publicAgent] });
  });
});

describe("secret keys", () => {
  test("POST /organizations/{id}/secret-keys: 201 with the key shown once, stored only as a hash", async () => {
    const org = await newOrganization();
    await newAgent(org.id);
    const { status, body } = await admin(ctx, "POST", `/organizations/${org.id}/secret-keys`, {
      json: { mode: "live", scopes: ["webcalls:write", "calls:write", "webcalls:write"] },
    });
    expect(status).toBe(201);
    expect(body).toMatchObject({ mode: "live", scopes: ["webcalls:write", "calls:write"], agentIds: null });
    expect(body.id).toMatch(ID("key"));
    expect(body.key).toMatch(/^inf_live_[0-9A-Za-z]{43}$/);
    expect(body.createdAt).toMatch(ISO);
    const [row] = await ctx.deps.sql`select * from secret_keys where id = ${body.id}`;
    expect(Buffer.from(row!.key_hash).equals(Buffer.from(sha256(body.key)))).toBe(true);
    expect(JSON.stringify(row)).not.toContain(body.key.slice(9));
  });

  test("a test key with every scope works at once; a key restricted to agents sees only them", async () => {
    const org = await newOrganization();
    const a = await newAgent(org.id, { name: "A" });
    const b = await newAgent(org.id, { name: "B" });
    const all = await admin(ctx, "POST", `/organizations/${org.id}/secret-keys`, {
      json: { mode: "test", scopes: ["*"] },
    });
    expect(all.body.key).toMatch(/^inf_test_/);
    const listAll = await ctx.request("/api/v1/agents", { key: all.body.key });
    expect(listAll.status).toBe(200);
    expect((await listAll.json()).agents.map((x: { id: string }) => x.id)).toEqual([b.id, a.id]);

    const restricted = await admin(ctx, "POST", `/organizations/${org.id}/secret-keys`, {
      json: { mode: "test", scopes: ["agents:read"], agentIds: [a.id] },
    });
    expect(restricted.status).toBe(201);
    expect(restricted.body.agentIds).toEqual([a.id]);
    const listOne = await ctx.request("/api/v1/agents", { key: restricted.body.key });
    expect((await listOne.json()).agents.map((x: { id: string }) => x.id)).toEqual([a.id]);
  });

  test("POST /secret-keys/{id}/revoke: 201 revoked (every admin POST is 201), the key is refused at once, revoking again is stable", async () => {
    const org = await newOrganization();
    await newAgent(org.id);
    const key = await admin(ctx, "POST", `/organizations/${org.id}/secret-keys`, {
      json: { mode: "test", scopes: ["*"] },
    });
    expect((await ctx.request("/api/v1/agents", { key: key.body.key })).status).toBe(200);
    const revoked = await admin(ctx, "POST", `/secret-keys/${key.body.id}/revoke`);
    expect(revoked.status).toBe(201);
    expect(revoked.body).toMatchObject({ id: key.body.id, mode: "test", scopes: ["*"], revoked: true });
    expect(revoked.body.key).toBeUndefined();
    expect(revoked.body.revokedAt).toMatch(ISO);
    const after = await ctx.request("/api/v1/agents", { key: key.body.key });
    await expectApiError(after, 401, "invalid_key");
    const again = await admin(ctx, "POST", `/secret-keys/${key.body.id}/revoke`);
    expect(again.status).toBe(201);
    expect(again.body.revokedAt).toBe(revoked.body.revokedAt);
  });
});

describe("publishable keys", () => {
  test("POST /organizations/{id}/publishable-keys: 201, origins normalised, key stored as a hash", async () => {
    const org = await newOrganization();
    const agent = await newAgent(org.id);
    const { status, body } = await admin(ctx, "POST", `/organizations/${org.id}/publishable-keys`, {
      json: {
        agentId: agent.id,
        allowedOrigins: ["https://Shop.Example.com/", "https://www.example.com:8443"],
        monthlyMinuteCap: 120,
      },
    });
    expect(status).toBe(201);
    expect(body).toMatchObject({
      agentId: agent.id,
      allowedOrigins: ["https://shop.example.com", "https://www.example.com:8443"],
      monthlyMinuteCap: 120,
    });
    expect(body.id).toMatch(ID("key"));
    expect(body.key).toMatch(/^inf_pub_[0-9A-Za-z]{43}$/);
    expect(body.createdAt).toMatch(ISO);
    const [row] = await ctx.deps.sql`select * from publishable_keys where id = ${body.id}`;
    expect(Buffer.from(row!.key_hash).equals(Buffer.from(sha256(body.key)))).toBe(true);
    expect(row!.revoked_at).toBeNull();
  });

  test("POST /publishable-keys/{id}/revoke: 201 revoked and recorded", async () => {
    const org = await newOrganization();
    const agent = await newAgent(org.id);
    const key = await admin(ctx, "POST", `/organizations/${org.id}/publishable-keys`, {
      json: { agentId: agent.id, allowedOrigins: ["https://a.example.com"], monthlyMinuteCap: 1 },
    });
    const revoked = await admin(ctx, "POST", `/publishable-keys/${key.body.id}/revoke`);
    expect(revoked.status).toBe(201);
    expect(revoked.body).toMatchObject({
      id: key.body.id,
      agentId: agent.id,
      allowedOrigins: ["https://a.example.com"],
      monthlyMinuteCap: 1,
      revoked: true,
    });
    expect(revoked.body.key).toBeUndefined();
    const [row] = await ctx.deps.sql`select revoked_at from publishable_keys where id = ${key.body.id}`;
    expect(row!.revoked_at).toBeInstanceOf(Date);
  });

  test("a secret key id is not a publishable key id and vice versa: 404", async () => {
    const org = await newOrganization();
    const agent = await newAgent(org.id);
    const secret = await admin(ctx, "POST", `/organizations/${org.id}/secret-keys`, {
      json: { mode: "test", scopes: ["*"] },
    });
    const pub = await admin(ctx, "POST", `/organizations/${org.id}/publishable-keys`, {
      json: { agentId: agent.id, allowedOrigins: ["https://a.example.com"], monthlyMinuteCap: 5 },
    });
    const wrong1 = await admin(ctx, "POST", `/publishable-keys/${secret.body.id}/revoke`);
    const wrong2 = await admin(ctx, "POST", `/secret-keys/${pub.body.id}/revoke`);
    for (const r of [wrong1, wrong2]) await expectApiError(r.res, 404, "not_found");
    expect((await ctx.request("/api/v1/agents", { key: secret.body.key })).status).toBe(200);
  });
});

describe("knowledge bases", () => {
  test("POST /organizations/{id}/knowledge-bases: 201", async () => {
    const org = await newOrganization();
    const { status, body } = await admin(ctx, "POST", `/organizations/${org.id}/knowledge-bases`, {
      json: { name: "FAQ" },
    });
    expect(status).toBe(201);
    expect(body).toMatchObject({ organizationId: org.id, name: "FAQ" });
    expect(body.id).toMatch(ID("kb"));
    expect(body.createdAt).toMatch(ISO);
  });
});

describe("unknown and malformed ids in paths are 404 not_found", () => {
  const unknownOrg = "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
  const unknownAgent = "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
  const unknownKey = "key_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
  // Malformed, of another kind or unknown: the same 404, naming no parameter (the path is not a parameter).
  const cases: [string, string, unknown, string | undefined][] = [];
  for (const org of [unknownOrg, "nope", unknownAgent, "org_01jd8y3m6w9q2t4v5x7z8a9b0c"]) {
    const param = undefined;
    cases.push(["PATCH", `/organizations/${org}`, { name: "x" }, param]);
    cases.push(["POST", `/organizations/${org}/agents`, { name: "x" }, param]);
    cases.push(["POST", `/organizations/${org}/secret-keys`, { mode: "test", scopes: ["*"] }, param]);
    cases.push([
      "POST",
      `/organizations/${org}/publishable-keys`,
      { agentId: unknownAgent, allowedOrigins: ["https://a.example.com"], monthlyMinuteCap: 1 },
      param,
    ]);
    cases.push(["POST", `/organizations/${org}/knowledge-bases`, { name: "x" }, param]);
  }
  for (const agent of [unknownAgent, "nope", unknownOrg])
    cases.push(["PATCH", `/agents/${agent}`, { name: "x" }, undefined]);
  for (const key of [unknownKey, "nope", unknownOrg]) {
    const param = undefined;
    cases.push(["POST", `/secret-keys/${key}/revoke`, undefined, param]);
    cases.push(["POST", `/publishable-keys/${key}/revoke`, undefined, param]);
  }

  test.each(cases)("%s %s", async (method, path, json, param) => {
    const before = await count(ctx, "organizations");
    const { res } = await admin(ctx, method, path, json === undefined ? {} : { json });
    await expectApiError(res, 404, "not_found", { param });
    expect(await count(ctx, "organizations")).toBe(before);
  });

  test("an empty id in a body is unknown like any other: 404 naming it, nothing written", async () => {
    const org = await newOrganization();
    const agent = await newAgent(org.id);
    const tables = ["publishable_keys", "secret_keys", "agents"] as const;
    const before = await Promise.all(tables.map((t) => count(ctx, t)));
    for (const [path, json, param] of [
      [
        `/organizations/${org.id}/publishable-keys`,
        { agentId: "", allowedOrigins: ["https://a.example.com"], monthlyMinuteCap: 5 },
        "agentId",
      ],
      [
        `/organizations/${org.id}/secret-keys`,
        { mode: "test", scopes: ["*"], agentIds: [agent.id, ""] },
        "agentIds",
      ],
      [`/organizations/${org.id}/agents`, { name: "x", knowledgeBaseIds: [""] }, "knowledgeBaseIds"],
    ] as const) {
      const { res } = await admin(ctx, "POST", path, { json });
      await expectApiError(res, 404, "not_found", { param, label: path });
    }
    const { res } = await admin(ctx, "PATCH", `/agents/${agent.id}`, { json: { knowledgeBaseIds: [""] } });
    await expectApiError(res, 404, "not_found", { param: "knowledgeBaseIds" });
    expect(await Promise.all(tables.map((t) => count(ctx, t)))).toEqual(before);
  });

  test("a malformed id is 404 even when the body is bad too", async () => {
    const { res } = await admin(ctx, "PATCH", "/organizations/nope", { json: { bogus: 1 } });
    await expectApiError(res, 404, "not_found");
  });
});

test("neither the keys created nor the admin token reach the logs", async () => {
  const org = await newOrganization();
  const agent = await newAgent(org.id);
  const secret = await admin(ctx, "POST", `/organizations/${org.id}/secret-keys`, {
    json: { mode: "live", scopes: ["*"] },
  });
  const pub = await admin(ctx, "POST", `/organizations/${org.id}/publishable-keys`, {
    json: { agentId: agent.id, allowedOrigins: ["https://a.example.com"], monthlyMinuteCap: 5 },
  });
  const logs = ctx.logs.join("\n");
  expect(logs).toContain("/api/admin/v1/organizations");
  for (const secretText of [secret.body.key, pub.body.key, ADMIN_TOKEN]) {
    expect(logs).not.toContain(secretText);
  }
});
