import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { parseEnv } from "../../src/env.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { ADMIN_TOKEN, admin, count, createAdminTestContext } from "./support.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
/** Every admin operation, with a valid body, on objects that exist. */
let operations: [string, string, unknown][];

beforeAll(async () => {
  ctx = await createAdminTestContext();
  seed = await seedOrganization(ctx);
  const org = seed.org.id;
  operations = [
    ["POST", "/organizations", { name: "X" }],
    ["PATCH", `/organizations/${org}`, { name: "X" }],
    ["POST", `/organizations/${org}/agents`, { name: "X" }],
    ["PATCH", `/agents/${seed.agent.id}`, { active: false }],
    ["POST", `/organizations/${org}/secret-keys`, { mode: "test", scopes: ["*"] }],
    [
      "POST",
      `/organizations/${org}/publishable-keys`,
      { agentId: seed.agent.id, allowedOrigins: ["https://a.example.com"], monthlyMinuteCap: 5 },
    ],
    ["POST", `/secret-keys/${seed.live.id}/revoke`, undefined],
    ["POST", `/publishable-keys/${seed.publishable.id}/revoke`, undefined],
    ["POST", `/organizations/${org}/knowledge-bases`, { name: "X" }],
  ];
});
afterAll(() => ctx.close());

/** The tables an admin operation writes to, to prove a refused request changed nothing. */
async function snapshot() {
  const [revoked] = await ctx.deps.sql<{ n: number }[]>`
    select (select count(*) from secret_keys where revoked_at is not null)::int
         + (select count(*) from publishable_keys where revoked_at is not null)::int as n`;
  const [agent] = await ctx.deps.sql`select name, active from agents where id = ${seed.agent.id}`;
  const [org] = await ctx.deps.sql`select name from organizations where id = ${seed.org.id}`;
  return {
    organizations: await count(ctx, "organizations"),
    agents: await count(ctx, "agents"),
    secretKeys: await count(ctx, "secret_keys"),
    publishableKeys: await count(ctx, "publishable_keys"),
    knowledgeBases: await count(ctx, "knowledge_bases"),
    revoked: revoked!.n,
    agent,
    org,
  };
}

describe("authentication: anything but `Bearer <ADMIN_TOKEN>` is 401 invalid_key", () => {
  const badAuthorizations: [string, Record<string, string>][] = [
    ["no header", {}],
    ["wrong token", { authorization: `Bearer ${"x".repeat(ADMIN_TOKEN.length)}` }],
    ["token with one character more", { authorization: `Bearer ${ADMIN_TOKEN}x` }],
    ["token prefix", { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}` }],
    ["token without the scheme", { authorization: ADMIN_TOKEN }],
    ["Basic scheme", { authorization: `Basic ${btoa(`admin:${ADMIN_TOKEN}`)}` }],
    ["empty bearer", { authorization: "Bearer " }],
    ["token in another header", { "x-admin-token": ADMIN_TOKEN }],
  ];

  test.each(badAuthorizations)("%s", async (_name, headers) => {
    const before = await snapshot();
    for (const [method, path, json] of operations) {
      const { res } = await admin(ctx, method, path, {
        token: null,
        headers,
        ...(json === undefined ? {} : { json }),
      });
      await expectApiError(res, 401, "invalid_key", { label: `${method} ${path}` });
    }
    expect(await snapshot()).toEqual(before);
  });

  test("a valid secret key is not an admin token", async () => {
    const c = ctx.deps;
    const all = await createSecretKey(c, seed.org.id, { mode: "live", scopes: ["*"] });
    for (const [method, path, json] of operations) {
      const { res } = await admin(ctx, method, path, {
        token: all.key,
        ...(json === undefined ? {} : { json }),
      });
      await expectApiError(res, 401, "invalid_key", { label: `${method} ${path}` });
    }
  });

  test("the scheme name is case-insensitive", async () => {
    const { status } = await admin(ctx, "POST", "/organizations", {
      token: null,
      headers: { authorization: `bearer ${ADMIN_TOKEN}` },
      json: { name: "Lowercase scheme" },
    });
    expect(status).toBe(201);
  });
});

describe("without ADMIN_TOKEN the admin API answers 404 not_found, as if absent", () => {
  let disabled: ReturnType<typeof createApp>;
  beforeAll(() => {
    disabled = createApp({ ...ctx.deps, env: parseEnv({ SIMULATION_TIME_SCALE: "0.01" }) });
  });
  async function call(method: string, path: string, init: { json?: unknown; authorization?: string }) {
    const headers = new Headers();
    if (init.authorization) headers.set("authorization", init.authorization);
    if (init.json !== undefined) headers.set("content-type", "application/json");
    const res = await disabled.fetch(
      new Request(`http://localhost/api/admin/v1${path}`, {
        method,
        headers,
        body: init.json === undefined ? undefined : JSON.stringify(init.json),
      }),
      { remoteAddress: "127.0.0.1" },
    );
    return { res, body: await res.clone().json() };
  }

  test("every operation, with or without a token, with good or bad bodies", async () => {
    const before = await snapshot();
    for (const [method, path, json] of operations) {
      for (const authorization of [undefined, `Bearer ${ADMIN_TOKEN}`, "Bearer anything"]) {
        for (const body of [json, { bogus: true }]) {
          const r = await call(method, path, { json: body, authorization });
          await expectApiError(r.res, 404, "not_found", { label: `${method} ${path}` });
          expect(r.body.error.message).toBe(`No route ${method} /api/admin/v1${path}.`);
        }
      }
    }
    expect(await snapshot()).toEqual(before);
  });

  test("the routes stay documented in the OpenAPI, with the adminToken bearer scheme", async () => {
    const res = await disabled.fetch(new Request("http://localhost/api/openapi.json"), {});
    const doc = await res.json();
    expect(doc.components.securitySchemes.adminToken).toMatchObject({ type: "http", scheme: "bearer" });
    const expected = [
      ["post", "/api/admin/v1/organizations", "201"],
      ["patch", "/api/admin/v1/organizations/{id}", "200"],
      ["post", "/api/admin/v1/organizations/{id}/agents", "201"],
      ["patch", "/api/admin/v1/agents/{id}", "200"],
      ["post", "/api/admin/v1/organizations/{id}/secret-keys", "201"],
      ["post", "/api/admin/v1/organizations/{id}/publishable-keys", "201"],
      ["post", "/api/admin/v1/secret-keys/{id}/revoke", "201"],
      ["post", "/api/admin/v1/publishable-keys/{id}/revoke", "201"],
      ["post", "/api/admin/v1/organizations/{id}/knowledge-bases", "201"],
    ] as const;
    for (const [method, path, status] of expected) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op.security).toEqual([{ adminToken: [] }]);
      expect(Object.keys(op.responses)).toContain(status);
      expect(Object.keys(op.responses)).toContain("401");
      expect(Object.keys(op.responses)).toContain("404");
    }
    const create = doc.components.schemas.CreatePublishableKeyRequest;
    expect(create.additionalProperties).toBe(false);
    expect(create.required.sort()).toEqual(["agentId", "allowedOrigins", "monthlyMinuteCap"]);
  });
});
