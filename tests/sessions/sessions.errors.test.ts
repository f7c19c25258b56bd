import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey, revokeSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { mint } from "./helpers.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

/** A second agent of `orgId` and a key of `mode` restricted to it. */
async function keyRestrictedToNewAgent(
  orgId: string,
  mode: "live" | "test",
  scopes: Parameters<typeof createSecretKey>[2]["scopes"],
) {
  const c = ctx.deps;
  const second = await createAgent(c, orgId, { name: "Second" });
  const k = await createSecretKey(c, orgId, { mode, scopes, agentIds: [second.id] });
  return { second, k };
}

async function rowCount(): Promise<number> {
  const [row] = await ctx.db.sql<{ n: number }[]>`select count(*)::int as n from session_tokens`;
  return row!.n;
}

describe("POST /api/v1/web-call-sessions: authentication and permissions", () => {
  test("missing, garbage, publishable and revoked keys are 401 invalid_key", async () => {
    const c = ctx.deps;
    const revoked = await createSecretKey(c, seed.org.id, { mode: "live", scopes: ["*"] });
    await revokeSecretKey(c, revoked.id);
    for (const key of [
      undefined,
      "garbage",
      seed.publishable.key,
      revoked.key,
      `inf_live_${"A".repeat(43)}`,
    ]) {
      const res = await mint(ctx, key, { agentId: seed.agent.id });
      await expectApiError(res, 401, "invalid_key");
    }
  });

  test("a key without webcalls:write is 403 missing_scope", async () => {
    const k = await createSecretKey(ctx.deps, seed.org.id, {
      mode: "live",
      scopes: ["calls:read", "calls:write"],
    });
    await expectApiError(await mint(ctx, k.key, { agentId: seed.agent.id }), 403, "missing_scope");
  });

  test("an unknown, malformed or foreign agent is 404 not_found with param agentId", async () => {
    for (const agentId of [`agt_${"0".repeat(26)}`, "agt_nope", "", "x".repeat(300), other.agent.id]) {
      await expectApiError(await mint(ctx, seed.liveKey, { agentId }), 404, "not_found", {
        param: "agentId",
      });
    }
  });

  test("a key restricted to other agents is 403 agent_not_allowed; an allowed agent mints", async () => {
    const { second, k } = await keyRestrictedToNewAgent(seed.org.id, "test", ["webcalls:write"]);
    await expectApiError(await mint(ctx, k.key, { agentId: seed.agent.id }), 403, "agent_not_allowed", {
      param: "agentId",
    });
    expect((await mint(ctx, k.key, { agentId: second.id })).status).toBe(201);
  });

  test("a live key without an active paid plan is 403 plan_required and stores nothing; its test key mints", async () => {
    const s = await seedOrganization(ctx, { paidPlan: false });
    const before = await rowCount();
    await expectApiError(await mint(ctx, s.liveKey, { agentId: s.agent.id }), 403, "plan_required");
    expect(await rowCount()).toBe(before);
    expect((await mint(ctx, s.testKey, { agentId: s.agent.id })).status).toBe(201);
  });

  test("an unknown or foreign agent stores nothing", async () => {
    const before = await rowCount();
    for (const key of [seed.liveKey, seed.testKey]) {
      for (const agentId of [`agt_${"0".repeat(26)}`, other.agent.id]) {
        await expectApiError(await mint(ctx, key, { agentId }), 404, "not_found", { param: "agentId" });
      }
    }
    expect(await rowCount()).toBe(before);
  });

  test("the agent is checked before the key's agents: with a restricted key an unknown or foreign agent is 404", async () => {
    const { k } = await keyRestrictedToNewAgent(seed.org.id, "live", ["webcalls:write"]);
    for (const agentId of [`agt_${"1".repeat(26)}`, other.agent.id]) {
      await expectApiError(await mint(ctx, k.key, { agentId }), 404, "not_found", { param: "agentId" });
    }
    await expectApiError(await mint(ctx, k.key, { agentId: seed.agent.id }), 403, "agent_not_allowed", {
      param: "agentId",
    });
  });

  test("without a paid plan: unknown agent 404 → key's agents 403 agent_not_allowed → 403 plan_required", async () => {
    const s = await seedOrganization(ctx, { paidPlan: false });
    const { second, k } = await keyRestrictedToNewAgent(s.org.id, "live", ["*"]);
    const outcomes = [];
    for (const agentId of [`agt_${"2".repeat(26)}`, s.agent.id, second.id]) {
      outcomes.push(await outcomeOf(await mint(ctx, k.key, { agentId })));
    }
    expect(outcomes).toEqual(["404 not_found", "403 agent_not_allowed", "403 plan_required"]);
  });

  test("the agent is checked before the plan: a foreign agent is 404 even without a paid plan", async () => {
    const s = await seedOrganization(ctx, { paidPlan: false });
    await expectApiError(await mint(ctx, s.liveKey, { agentId: other.agent.id }), 404, "not_found", {
      param: "agentId",
    });
  });
});

describe("POST /api/v1/web-call-sessions: body validation", () => {
  const cases: [string, unknown, string | undefined][] = [
    ["missing agentId", {}, "agentId"],
    ["agentId not a string", { agentId: 42 }, "agentId"],
    ["agentId null", { agentId: null }, "agentId"],
    ["an unknown field", { agentId: "agt_x", extra: 1 }, "extra"],
    ["variables an array", { agentId: "agt_x", variables: [1, 2] }, "variables"],
    ["variables a string", { agentId: "agt_x", variables: "a=b" }, "variables"],
    ["variables null", { agentId: "agt_x", variables: null }, "variables"],
    ["a nested object value", { agentId: "agt_x", variables: { a: { b: 1 } } }, "variables.a"],
    ["an array value", { agentId: "agt_x", variables: { list: [1] } }, "variables.list"],
    [
      "a string over 1,000 characters",
      { agentId: "agt_x", variables: { s: "x".repeat(1001) } },
      "variables.s",
    ],
    [
      "a name over 64 characters",
      { agentId: "agt_x", variables: { ["n".repeat(65)]: 1 } },
      `variables.${"n".repeat(65)}`,
    ],
    ["an empty name", { agentId: "agt_x", variables: { "": 1 } }, "variables."],
    [
      "51 variables",
      { agentId: "agt_x", variables: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])) },
      "variables",
    ],
    ["a JSON array body", [], undefined],
    ["a JSON string body", "agt_x", undefined],
  ];
  for (const [name, body, param] of cases) {
    test(`${name} is 400 invalid_request${param ? ` with param ${param}` : ""}`, async () => {
      const before = await rowCount();
      await expectApiError(await mint(ctx, seed.liveKey, body), 400, "invalid_request", { param });
      expect(await rowCount()).toBe(before);
    });
  }

  test("a body that is not JSON is 400 invalid_request; no Content-Type is 415; no body is 400", async () => {
    const bad = await ctx.request("/api/v1/web-call-sessions", {
      method: "POST",
      key: seed.liveKey,
      headers: { "content-type": "application/json" },
      body: "{agentId:",
    });
    await expectApiError(bad, 400, "invalid_request");
    const untyped = await ctx.request("/api/v1/web-call-sessions", {
      method: "POST",
      key: seed.liveKey,
      body: JSON.stringify({ agentId: seed.agent.id }),
    });
    await expectApiError(untyped, 415, "unsupported_media_type");
    const empty = await ctx.request("/api/v1/web-call-sessions", { method: "POST", key: seed.liveKey });
    await expectApiError(empty, 400, "invalid_request", { param: "agentId" });
  });

  test("every error carries the request id of its X-Request-Id header", async () => {
    const res = await mint(ctx, seed.liveKey, { agentId: 1 });
    // expectApiError holds requestId to the X-Request-Id header.
    const { error } = await expectApiError(res, 400, "invalid_request", { param: "agentId" });
    expect(error.message).toContain("agentId");
  });
});
