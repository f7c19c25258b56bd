import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sha256 } from "../../src/auth/keys.ts";
import { ManualClock } from "../../src/clock.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { mint, TOKEN_RE } from "./helpers.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

describe("POST /api/v1/web-call-sessions", () => {
  test("a live key mints a token: 201, inf_wcs_ prefix, expires five minutes after issue, livemode true", async () => {
    clock.set("2026-11-21T09:30:00.123Z");
    const res = await mint(ctx, seed.liveKey, { agentId: seed.agent.id });
    expect(res.status).toBe(201);
    expect(res.headers.get("idempotent-replayed")).toBeNull();
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const body = await res.json();
    expect(Object.keys(body).sort()).toEqual(["expiresAt", "livemode", "token"]);
    expect(body.token).toMatch(TOKEN_RE);
    expect(body.expiresAt).toBe("2026-11-21T09:35:00.123Z");
    expect(body.livemode).toBe(true);
  });

  test("a test key mints a token with livemode false, without paid plan or plan minutes", async () => {
    const freeSeed = await seedOrganization(ctx, { paidPlan: false, planMinutes: 0 });
    const res = await mint(ctx, freeSeed.testKey, { agentId: freeSeed.agent.id });
    expect(res.status).toBe(201);
    const body = await res.json();
    expect(body.token).toMatch(TOKEN_RE);
    expect(body.livemode).toBe(false);
  });

  test("plan minutes are not checked at mint: a paid plan with no minutes left still mints", async () => {
    const s = await seedOrganization(ctx, { paidPlan: true, planMinutes: 0 });
    const res = await mint(ctx, s.liveKey, { agentId: s.agent.id });
    expect(res.status).toBe(201);
  });

  test("an inactive agent still gets a token (availability is checked when the token is used)", async () => {
    const s = await seedOrganization(ctx, { agentActive: false });
    const res = await mint(ctx, s.liveKey, { agentId: s.agent.id });
    expect(res.status).toBe(201);
  });

  test("every mint is a new random token", async () => {
    const tokens = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const res = await mint(ctx, seed.testKey, { agentId: seed.agent.id });
      tokens.add((await res.json()).token);
    }
    expect(tokens.size).toBe(5);
  });

  test("only the SHA-256 of the token is stored, with its variables, agent, mode and minting key", async () => {
    const variables = { customerName: "Ada", orderId: 1042, vip: true, note: null };
    const res = await mint(ctx, seed.liveKey, { agentId: seed.agent.id, variables });
    const { token, expiresAt } = await res.json();
    const rows = await ctx.db.sql<
      {
        token_hash: Uint8Array;
        organization_id: string;
        livemode: boolean;
        secret_key_id: string;
        agent_id: string;
        variables: unknown;
        expires_at: Date;
        spent_at: Date | null;
        as_text: string;
      }[]
    >`select t.*, t::text as as_text from session_tokens t where token_hash = ${sha256(token)}`;
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row.organization_id).toBe(seed.org.id);
    expect(row.livemode).toBe(true);
    expect(row.secret_key_id).toBe(seed.live.id);
    expect(row.agent_id).toBe(seed.agent.id);
    expect(row.variables).toEqual(variables);
    expect(row.expires_at.toISOString()).toBe(expiresAt);
    expect(row.spent_at).toBeNull();
    const secretPart = token.slice("inf_wcs_".length);
    expect(row.as_text).not.toContain(secretPart);
    const [anywhere] = await ctx.db.sql<{ n: number }[]>`
      select count(*)::int as n from session_tokens t where t::text like ${`%${secretPart}%`}`;
    expect(anywhere!.n).toBe(0);
  });

  test("variables at the limits are accepted: 50 keys, 64-character names, 1,000-character strings", async () => {
    const variables: Record<string, unknown> = {};
    for (let i = 0; i < 48; i++) variables[`k${i}`] = i % 2 ? i : `v${i}`;
    variables["n".repeat(64)] = "x".repeat(1000);
    variables.flag = false;
    expect(Object.keys(variables)).toHaveLength(50);
    const res = await mint(ctx, seed.liveKey, { agentId: seed.agent.id, variables });
    expect(res.status).toBe(201);
  });

  test("the token and the key never reach the logs", async () => {
    ctx.logs.length = 0;
    const res = await mint(ctx, seed.liveKey, { agentId: seed.agent.id, variables: { secretish: "x" } });
    const { token } = await res.json();
    await mint(ctx, seed.liveKey, { agentId: "agt_unknown" });
    await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, { "Idempotency-Key": "log-check" });
    await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, { "Idempotency-Key": "log-check" });
    expect(ctx.logs.length).toBeGreaterThan(0);
    const all = ctx.logs.join("\n");
    for (const secret of [token, seed.liveKey]) {
      expect(all).not.toContain(secret);
      expect(all).not.toContain(secret.slice(-20));
    }
    expect(all).not.toContain("log-check");
  });

  test("a key in the query string is ignored: only the Authorization header authenticates", async () => {
    for (const q of [`key=${seed.liveKey}`, `api_key=${seed.liveKey}`, `access_token=${seed.liveKey}`]) {
      const res = await ctx.request(`/api/v1/web-call-sessions?${q}`, {
        method: "POST",
        json: { agentId: seed.agent.id },
      });
      await expectApiError(res, 401, "invalid_key");
    }
  });

  test("the paid plan is read when minting: granting it lets a live key mint", async () => {
    const s = await seedOrganization(ctx, { paidPlan: false });
    await expectApiError(await mint(ctx, s.liveKey, { agentId: s.agent.id }), 403, "plan_required");
    await updateOrganization(ctx.deps, s.org.id, { paidPlan: true });
    expect((await mint(ctx, s.liveKey, { agentId: s.agent.id })).status).toBe(201);
  });

  test("a key with only webcalls:write mints", async () => {
    const k = await createSecretKey(ctx.deps, seed.org.id, {
      mode: "test",
      scopes: ["webcalls:write"],
    });
    expect((await mint(ctx, k.key, { agentId: seed.agent.id })).status).toBe(201);
  });
});
