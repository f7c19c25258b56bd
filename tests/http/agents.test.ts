import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey, revokeSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

describe("GET /api/v1/agents", () => {
  test("lists the organization's agents in their own format", async () => {
    const res = await ctx.request("/api/v1/agents", { key: seed.liveKey });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(await res.json()).toEqual({
      agents: [
        {
          id: seed.agent.id,
          name: "Reception",
          active: true,
          language: "en",
          instructions: null,
          greeting: null,
          knowledgeBaseIds: [],
          livekitAgentName: null,
          createdAt: seed.agent.createdAt,
        },
      ],
    });
  });

  test("a key restricted to one agent sees only that agent", async () => {
    const c = ctx.deps;
    const other = await createAgent(c, seed.org.id, { name: "Sales" });
    const restricted = await createSecretKey(c, seed.org.id, {
      mode: "test",
      scopes: ["agents:read"],
      agentIds: [other.id],
    });
    const res = await ctx.request("/api/v1/agents", { key: restricted.key });
    expect((await res.json()).agents.map((a: { id: string }) => a.id)).toEqual([other.id]);
  });

  test("missing, garbage, unknown and revoked keys are 401 invalid_key", async () => {
    const c = ctx.deps;
    const revoked = await createSecretKey(c, seed.org.id, { mode: "live", scopes: ["*"] });
    await revokeSecretKey(c, revoked.id);
    const unknown = `inf_live_${"A".repeat(43)}`;
    for (const key of [undefined, "garbage", unknown, revoked.key, seed.publishable.key]) {
      const res = await ctx.request("/api/v1/agents", key ? { key } : {});
      await expectApiError(res, 401, "invalid_key");
    }
  });

  test("a key without agents:read is 403 missing_scope", async () => {
    const c = ctx.deps;
    const k = await createSecretKey(c, seed.org.id, { mode: "live", scopes: ["calls:read"] });
    const res = await ctx.request("/api/v1/agents", { key: k.key });
    await expectApiError(res, 403, "missing_scope");
  });
});

describe("HTTP conventions", () => {
  test("unknown routes are JSON 404 not_found", async () => {
    const res = await ctx.request("/api/v1/nope");
    await expectApiError(res, 404, "not_found");
  });
});
