import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ErrorCode } from "../../src/errors.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { admin, count, createAdminTestContext } from "./support.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let foreignAgentId: string;

beforeAll(async () => {
  ctx = await createAdminTestContext();
  seed = await seedOrganization(ctx);
  const c = ctx.deps;
  const other = await createOrganization(c, { name: "Other" });
  foreignAgentId = (await createAgent(c, other.id, { name: "Theirs" })).id;
});
afterAll(() => ctx.close());

/** Tables an invalid request must leave alone. */
async function totals() {
  return Promise.all(
    ["organizations", "agents", "secret_keys", "publishable_keys", "knowledge_bases"].map((t) =>
      count(ctx, t),
    ),
  );
}

/** The admin request is refused (see expectApiError) and writes nothing. */
async function refused(
  method: string,
  path: string,
  opts: Parameters<typeof admin>[3],
  status: number,
  code: ErrorCode,
  param?: string,
) {
  const before = await totals();
  const r = await admin(ctx, method, path, opts);
  const { error } = await expectApiError(r.res, status, code, { param, label: `${method} ${path}` });
  expect(await totals()).toEqual(before);
  return error;
}

describe("bodies that are not JSON objects", () => {
  test("malformed JSON is 400 invalid_request", async () => {
    const err = await refused(
      "POST",
      "/organizations",
      { body: '{"name": "Acme"', headers: { "content-type": "application/json" } },
      400,
      "invalid_request",
    );
    expect(err.message).toContain("not valid JSON");
  });
  test("a body without a JSON content type is 415 unsupported_media_type", async () => {
    await refused(
      "POST",
      "/organizations",
      { body: '{"name": "Acme"}', headers: { "content-type": "text/plain" } },
      415,
      "unsupported_media_type",
    );
  });
  test("no body at all is validated as empty: 400 with the missing field", async () => {
    await refused("POST", "/organizations", {}, 400, "invalid_request", "name");
  });
  test.each([[[{ name: "Acme" }]], ["Acme"], [42], [null]])(
    "JSON %j instead of an object is 400",
    async (json) => {
      await refused("POST", "/organizations", { json }, 400, "invalid_request");
    },
  );
  test("a body over 64 KiB is 413 payload_too_large", async () => {
    await refused("POST", "/organizations", { json: { name: "x".repeat(70_000) } }, 413, "payload_too_large");
  });
});

describe("organizations", () => {
  test.each([
    [{ name: "Acme", color: "red" }, "color"],
    [{ name: 5 }, "name"],
    [{ name: "" }, "name"],
    [{ name: "   " }, "name"],
    [{ name: "x".repeat(201) }, "name"],
    [{ name: "Acme", paidPlan: "true" }, "paidPlan"],
    [{ name: "Acme", planMinutes: -1 }, "planMinutes"],
    [{ name: "Acme", planMinutes: 1.5 }, "planMinutes"],
    [{ name: "Acme", planMinutes: "10" }, "planMinutes"],
  ])("POST %j is 400 invalid_request with param %s", async (json, param) => {
    await refused("POST", "/organizations", { json }, 400, "invalid_request", param);
  });

  test("an unknown field says which one", async () => {
    const err = await refused(
      "POST",
      "/organizations",
      { json: { name: "Acme", plan: "gold" } },
      400,
      "invalid_request",
      "plan",
    );
    expect(err.message).toBe('Unknown parameter "plan".');
  });

  test.each([
    [{ id: "org_x" }, "id"],
    [{ paidPlan: null }, "paidPlan"],
    [{ planMinutes: -5 }, "planMinutes"],
    [{ name: null }, "name"],
  ])("PATCH %j is 400 invalid_request with param %s and changes nothing", async (json, param) => {
    const [before] = await ctx.deps.sql`select * from organizations where id = ${seed.org.id}`;
    await refused("PATCH", `/organizations/${seed.org.id}`, { json }, 400, "invalid_request", param);
    const [after] = await ctx.deps.sql`select * from organizations where id = ${seed.org.id}`;
    expect(after).toEqual(before!);
  });
});

describe("agents", () => {
  /** `"long"` stands for a text one character over the field's limit (kept short in the test names). */
  const LIMITS: Record<string, number> = { instructions: 20_000, greeting: 1_000 };
  const expand = (json: Record<string, unknown>) =>
    Object.fromEntries(
      Object.entries(json).map(([k, v]) => [k, v === "long" ? "x".repeat((LIMITS[k] ?? 0) + 1) : v]),
    );

  test.each([
    [{}, "name"],
    [{ name: "A", active: "yes" }, "active"],
    [{ name: "A", language: "fr_CA" }, "language"],
    [{ name: "A", language: "12" }, "language"],
    [{ name: "A", language: "" }, "language"],
    [{ name: "A", language: 7 }, "language"],
    [{ name: "A", instructions: "long" }, "instructions"],
    [{ name: "A", instructions: 7 }, "instructions"],
    [{ name: "A", greeting: "long" }, "greeting"],
    [{ name: "A", knowledgeBaseIds: "kb_x" }, "knowledgeBaseIds"],
    [{ name: "A", knowledgeBaseIds: [7] }, "knowledgeBaseIds.0"],
    [{ name: "A", livekitAgentName: "" }, "livekitAgentName"],
    [{ name: "A", livekitAgentName: 7 }, "livekitAgentName"],
    [{ name: "A", organizationId: "org_x" }, "organizationId"],
  ])("POST %j is 400 invalid_request with param %s", async (json, param) => {
    await refused(
      "POST",
      `/organizations/${seed.org.id}/agents`,
      { json: expand(json) },
      400,
      "invalid_request",
      param,
    );
  });

  test.each([
    [{ active: 1 }, "active"],
    [{ name: "" }, "name"],
    [{ language: "en-" }, "language"],
    [{ greeting: "long" }, "greeting"],
    [{ knowledgeBaseIds: null }, "knowledgeBaseIds"],
    [{ id: "agt_x" }, "id"],
  ])("PATCH %j is 400 invalid_request with param %s", async (json, param) => {
    await refused("PATCH", `/agents/${seed.agent.id}`, { json: expand(json) }, 400, "invalid_request", param);
  });
});

describe("secret keys", () => {
  const path = () => `/organizations/${seed.org.id}/secret-keys`;
  test.each([
    [{ scopes: ["*"] }, "mode"],
    [{ mode: "prod", scopes: ["*"] }, "mode"],
    [{ mode: "live" }, "scopes"],
    [{ mode: "live", scopes: [] }, "scopes"],
    [{ mode: "live", scopes: "*" }, "scopes"],
    [{ mode: "live", scopes: ["calls:read", "calls:delete"] }, "scopes.1"],
    [{ mode: "live", scopes: ["admin"] }, "scopes.0"],
    [{ mode: "live", scopes: ["*"], agentIds: [] }, "agentIds"],
    [{ mode: "live", scopes: ["*"], agentIds: "agt_x" }, "agentIds"],
    [{ mode: "live", scopes: ["*"], livemode: true }, "livemode"],
  ])("POST %j is 400 invalid_request with param %s", async (json, param) => {
    await refused("POST", path(), { json }, 400, "invalid_request", param);
  });

  test("agentIds of another organization, unknown or malformed are 404 not_found with param", async () => {
    for (const agentIds of [
      [foreignAgentId],
      [seed.agent.id, foreignAgentId],
      ["agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
      ["not-an-id"],
    ]) {
      const err = await refused(
        "POST",
        path(),
        { json: { mode: "test", scopes: ["*"], agentIds } },
        404,
        "not_found",
        "agentIds",
      );
      expect(err.message).toContain(agentIds.at(-1)!);
    }
  });
});

describe("publishable keys", () => {
  const path = () => `/organizations/${seed.org.id}/publishable-keys`;
  const valid = () => ({
    agentId: seed.agent.id,
    allowedOrigins: ["https://shop.example.com"],
    monthlyMinuteCap: 10,
  });

  test.each([
    ["http://shop.example.com", "an http:// origin"],
    ["https://*.example.com", "a wildcard"],
    ["*", "a bare wildcard"],
    ["https://shop.example.com/checkout", "a path"],
    ["https://shop.example.com/?a=1", "a query"],
    ["https://shop.example.com#top", "a fragment"],
    ["https://user:pw@shop.example.com", "credentials"],
    ["shop.example.com", "no scheme"],
    ["wss://shop.example.com", "another scheme"],
    ["", "an empty string"],
  ])("origin %p (%s) is 400 invalid_request", async (origin) => {
    const err = await refused(
      "POST",
      path(),
      { json: { ...valid(), allowedOrigins: ["https://ok.example.com", origin] } },
      400,
      "invalid_request",
      "allowedOrigins.1",
    );
    expect(err.message).toContain("HTTPS origin");
  });

  test.each([
    [{ monthlyMinuteCap: 0 }, "monthlyMinuteCap"],
    [{ monthlyMinuteCap: -3 }, "monthlyMinuteCap"],
    [{ monthlyMinuteCap: 2.5 }, "monthlyMinuteCap"],
    [{ monthlyMinuteCap: "10" }, "monthlyMinuteCap"],
    [{ allowedOrigins: [] }, "allowedOrigins"],
    [{ allowedOrigins: "https://shop.example.com" }, "allowedOrigins"],
    [{ agentId: 12 }, "agentId"],
    [{ origins: ["https://shop.example.com"] }, "origins"],
  ])("POST with %j is 400 invalid_request with param %s", async (patch, param) => {
    await refused("POST", path(), { json: { ...valid(), ...patch } }, 400, "invalid_request", param);
  });

  test("missing fields are 400 invalid_request naming the field", async () => {
    for (const field of ["agentId", "allowedOrigins", "monthlyMinuteCap"] as const) {
      const json: Record<string, unknown> = valid();
      delete json[field];
      await refused("POST", path(), { json }, 400, "invalid_request", field);
    }
  });

  test("an agent of another organization, unknown or malformed is 404 not_found with param agentId", async () => {
    for (const agentId of [foreignAgentId, "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "agt_nope"]) {
      await refused("POST", path(), { json: { ...valid(), agentId } }, 404, "not_found", "agentId");
    }
  });
});

describe("knowledge bases", () => {
  test.each([
    [{}, "name"],
    [{ name: "" }, "name"],
    [{ name: ["FAQ"] }, "name"],
    [{ name: "FAQ", documents: [] }, "documents"],
  ])("POST %j is 400 invalid_request with param %s", async (json, param) => {
    await refused(
      "POST",
      `/organizations/${seed.org.id}/knowledge-bases`,
      { json },
      400,
      "invalid_request",
      param,
    );
  });
});
