import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { KEY_USAGE_EVERY_MS } from "../../src/db/keyUsage.ts";
import { reserveMinutes } from "../../src/services/minutes.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { ADMIN_TOKEN, admin } from "./support.ts";

/**
 * The operators' reads: organizations, agents, secret and publishable keys in the cursor convention,
 * one organization with this month's usage, and when keys were last used.
 */

const clock = new ManualClock("2026-11-21T09:30:00.000Z");
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
beforeAll(async () => {
  // The clock is the test's: `lastUsedAt` and the month of usage are read from it.
  ctx = await createTestContext({ env: { ADMIN_TOKEN }, clock });
  seed = await seedOrganization(ctx, { planMinutes: 500 });
});
afterAll(() => ctx.close());

/** Every item of an admin list, walked page by page with `limit`. */
async function walk(path: string, limit: number) {
  const ids: string[] = [];
  let after: string | undefined;
  for (let pages = 0; pages < 100; pages++) {
    const q = `limit=${limit}${after ? `&starting_after=${after}` : ""}`;
    const { status, body } = await admin(ctx, "GET", `${path}?${q}`);
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(["data", "has_more"]);
    ids.push(...body.data.map((x: { id: string }) => x.id));
    if (!body.has_more) return ids;
    after = body.data.at(-1).id;
  }
  throw new Error("too many pages");
}

describe("lists in the cursor convention", () => {
  test("GET /organizations walks every organization once, newest first", async () => {
    for (let i = 0; i < 4; i++) {
      clock.advance(1);
      expect((await admin(ctx, "POST", "/organizations", { json: { name: `Org ${i}` } })).status).toBe(201);
    }
    const all = await walk("/organizations", 100);
    expect(await walk("/organizations", 2)).toEqual(all);
    const [rows] = [await ctx.deps.sql<{ id: string }[]>`select id from organizations`];
    expect([...all].sort()).toEqual(rows.map((r) => r.id).sort());
    const { body } = await admin(ctx, "GET", "/organizations?limit=1");
    expect(Object.keys(body.data[0]).sort()).toEqual([
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
  });

  test("GET /organizations/{id}/agents lists that organization's agents only", async () => {
    const second = await admin(ctx, "POST", `/organizations/${seed.org.id}/agents`, {
      json: { name: "Two" },
    });
    const { status, body } = await admin(ctx, "GET", `/organizations/${seed.org.id}/agents`);
    expect(status).toBe(200);
    expect(body.data.map((a: { id: string }) => a.id)).toEqual([second.body.id, seed.agent.id]);
    expect(body.data[1]).toEqual(seed.agent);
    expect(await walk(`/organizations/${seed.org.id}/agents`, 1)).toEqual([second.body.id, seed.agent.id]);
  });

  test("secret keys: never the value nor the hash, revoked ones included", async () => {
    await admin(ctx, "POST", `/secret-keys/${seed.live.id}/revoke`);
    const { status, body } = await admin(ctx, "GET", `/organizations/${seed.org.id}/secret-keys`);
    expect(status).toBe(200);
    expect(body.data.map((k: { id: string }) => k.id)).toEqual([seed.test.id, seed.live.id]);
    const text = JSON.stringify(body);
    expect(text).not.toContain(seed.liveKey);
    expect(text).not.toContain(seed.testKey);
    const live = body.data[1];
    expect(Object.keys(live).sort()).toEqual(
      [
        "id",
        "organizationId",
        "mode",
        "scopes",
        "agentIds",
        "start",
        "createdAt",
        "revoked",
        "revokedAt",
        "lastUsedAt",
      ].sort(),
    );
    expect(live).toMatchObject({ mode: "live", revoked: true, start: seed.live.start });
    expect(seed.liveKey.startsWith(live.start.replace("…", ""))).toBe(true);
    expect(body.data[0]).toMatchObject({ mode: "test", revoked: false, revokedAt: null });
  });

  test("publishable keys: never the value; minutes used this month", async () => {
    // A call of this month reserved 7 minutes on the key's cap.
    await ctx.deps.sql.begin((tx) =>
      reserveMinutes(tx, clock, {
        callId: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
        organizationId: seed.org.id,
        livemode: true,
        publishableKeyId: seed.publishable.id,
      }),
    );
    const { status, body } = await admin(ctx, "GET", `/organizations/${seed.org.id}/publishable-keys`);
    expect(status).toBe(200);
    expect(JSON.stringify(body)).not.toContain(seed.publishable.key);
    expect(body.data).toEqual([
      {
        id: seed.publishable.id,
        organizationId: seed.org.id,
        agentId: seed.agent.id,
        allowedOrigins: seed.publishable.allowedOrigins,
        monthlyMinuteCap: seed.publishable.monthlyMinuteCap,
        start: seed.publishable.start,
        createdAt: seed.publishable.createdAt,
        revoked: false,
        revokedAt: null,
        lastUsedAt: null,
        minutesUsedThisMonth: 10,
      },
    ]);
  });

  test("GET /organizations/{id}: the organization and this month's plan usage", async () => {
    const { status, body } = await admin(ctx, "GET", `/organizations/${seed.org.id}`);
    expect(status).toBe(200);
    expect(body).toEqual({ ...seed.org, usage: { month: "2026-11", planMinutesUsed: 10 } });
    clock.set("2026-12-01T00:00:00.000Z");
    const next = await admin(ctx, "GET", `/organizations/${seed.org.id}`);
    expect(next.body.usage).toEqual({ month: "2026-12", planMinutesUsed: 0 });
    clock.set("2026-11-21T10:00:00.000Z");
  });

  test("refusals: unknown organization 404, bad query 400 invalid_query, foreign cursor 400 invalid_cursor", async () => {
    for (const path of ["/organizations/org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "/organizations/nope/agents"]) {
      const { status, body } = await admin(ctx, "GET", path);
      expect(`${path} ${status} ${body.error.code}`).toBe(`${path} 404 not_found`);
    }
    for (const [query, param] of [
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["starting_after=x", "starting_after"],
      ["bogus=1", "bogus"],
    ]) {
      const { status, body } = await admin(ctx, "GET", `/organizations/${seed.org.id}/secret-keys?${query}`);
      expect(status).toBe(400);
      expect(body.error).toMatchObject({ code: "invalid_query", param });
    }
    const other = await admin(ctx, "POST", "/organizations", { json: { name: "Other" } });
    const foreign = await admin(
      ctx,
      "GET",
      `/organizations/${other.body.id}/agents?starting_after=${seed.agent.id}`,
    );
    expect(foreign.status).toBe(400);
    expect(foreign.body.error).toMatchObject({ code: "invalid_cursor", param: "starting_after" });
  });
});

describe("lastUsedAt of secret keys", () => {
  async function lastUsed(keyId: string) {
    await ctx.deps.keyUsage.settled();
    const { body } = await admin(ctx, "GET", `/organizations/${seed.org.id}/secret-keys?limit=100`);
    return body.data.find((k: { id: string }) => k.id === keyId).lastUsedAt as string | null;
  }

  test("null until used; then written at most once a minute per key, not on every request", async () => {
    expect(await lastUsed(seed.test.id)).toBeNull();
    const first = clock.now().toISOString();
    expect((await ctx.request("/api/v1/agents", { key: seed.testKey })).status).toBe(200);
    expect(await lastUsed(seed.test.id)).toBe(first);

    clock.advance(KEY_USAGE_EVERY_MS - 1_000);
    expect((await ctx.request("/api/v1/agents", { key: seed.testKey })).status).toBe(200);
    expect(await lastUsed(seed.test.id)).toBe(first);

    clock.advance(1_000);
    const later = clock.now().toISOString();
    // A key without the scope an operation needs was still presented validly: it counts as used.
    const refused = await ctx.request("/api/v1/tasks", { key: seed.testKey });
    expect(refused.status).not.toBe(401);
    expect(await lastUsed(seed.test.id)).toBe(later);
  });

  test("a wrong or revoked key records nothing", async () => {
    expect((await ctx.request("/api/v1/agents", { key: seed.liveKey })).status).toBe(401);
    expect(await lastUsed(seed.live.id)).toBeNull();
  });
});
