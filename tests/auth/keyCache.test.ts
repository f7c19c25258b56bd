import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import type { SecretKeyAuth } from "../../src/auth/access.ts";
import { KeyCache } from "../../src/auth/keyCache.ts";
import { GenerationCache } from "../../src/caches.ts";
import { evictOnChanges } from "../../src/compose.ts";
import { resolveSecretKey } from "../../src/http/secretKey.ts";
import { createSecretKey, revokeSecretKey } from "../../src/services/keys.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { createTestContext, depsFor, seedOrganization, type TestContext } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";
import { waitUntil } from "../helpers/wait.ts";

const auth = (keyId: string, organizationId: string): SecretKeyAuth => ({
  keyId,
  organizationId,
  mode: "live",
  livemode: true,
  scopes: ["*"],
  agentIds: null,
  paidPlan: true,
});

describe("KeyCache", () => {
  test("evicts by key, by organization, or everything", () => {
    const cache = new KeyCache();
    cache.set("h1", auth("key_1", "org_1"), cache.generation);
    cache.set("h2", auth("key_2", "org_1"), cache.generation);
    cache.set("h3", auth("key_3", "org_2"), cache.generation);
    cache.evictChange({ keyId: "key_1" });
    expect(cache.get("h1")).toBeUndefined();
    expect(cache.get("h2")?.keyId).toBe("key_2");
    cache.evictChange({ organizationId: "org_1" });
    expect(cache.get("h2")).toBeUndefined();
    expect(cache.get("h3")?.keyId).toBe("key_3");
    cache.evictChange({});
    expect(cache.get("h3")).toBeUndefined();
  });

  test("a resolution that raced with a change is not stored", () => {
    const cache = new KeyCache();
    const before = cache.generation;
    cache.evictChange({ keyId: "key_1" }); // the revocation commits while the lookup runs
    cache.set("h1", auth("key_1", "org_1"), before);
    expect(cache.get("h1")).toBeUndefined();
  });

  test("entries expire after their time to live", () => {
    const cache = new KeyCache();
    cache.set("h1", auth("key_1", "org_1"), cache.generation, 0);
    expect(cache.get("h1", 29_999)).toBeDefined();
    expect(cache.get("h1", 30_000)).toBeUndefined();
  });
});

describe("GenerationCache", () => {
  test("past its size the oldest entry goes", () => {
    const cache = new GenerationCache<number>({ maxEntries: 2 });
    for (const [i, key] of ["a", "b", "c"].entries()) cache.set(key, i, cache.generation);
    expect([cache.get("a"), cache.get("b"), cache.get("c")]).toEqual([undefined, 1, 2]);
  });
});

describe("resolving keys through the cache", () => {
  let ctx: TestContext;
  let seed: Awaited<ReturnType<typeof seedOrganization>>;
  beforeAll(async () => {
    ctx = await createTestContext();
    seed = await seedOrganization(ctx, { paidPlan: true });
  });
  afterAll(() => ctx.close());
  const c = () => ctx.deps;

  test("a revocation in this process refuses the key on the very next request", async () => {
    const k = await createSecretKey(c(), seed.org.id, { mode: "live", scopes: ["*"] });
    expect((await ctx.request("/api/v1/agents", { key: k.key })).status).toBe(200);
    expect((await ctx.request("/api/v1/agents", { key: k.key })).status).toBe(200); // now cached
    await revokeSecretKey(c(), k.id);
    expect((await ctx.request("/api/v1/agents", { key: k.key })).status).toBe(401);
  });

  test("an organization change is seen on the next request (paid plan)", async () => {
    expect((await resolveSecretKey(ctx.deps, `Bearer ${seed.liveKey}`))?.paidPlan).toBe(true);
    await updateOrganization(c(), seed.org.id, { paidPlan: false });
    expect((await resolveSecretKey(ctx.deps, `Bearer ${seed.liveKey}`))?.paidPlan).toBe(false);
    await updateOrganization(c(), seed.org.id, { paidPlan: true });
  });

  test("a key of one mode presented with the other prefix is refused even when cached", async () => {
    expect(await resolveSecretKey(ctx.deps, `Bearer ${seed.testKey}`)).not.toBeNull();
    const swapped = seed.testKey.replace("inf_test_", "inf_live_");
    expect(await resolveSecretKey(ctx.deps, `Bearer ${swapped}`)).toBeNull();
  });
});

describe("another process revokes a key", () => {
  let db: TestDatabase;
  let other: postgres.Sql;
  beforeAll(async () => {
    db = await createTestDatabase("postgres");
    other = postgres(db.url!, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await other.end();
    await db.close();
  });

  test("the trigger's notification evicts the cached key in this process", async () => {
    const deps = depsFor(db.sql);
    const seed = await seedOrganization({ deps });
    await evictOnChanges(db.sql, deps);
    expect(await resolveSecretKey(deps, `Bearer ${seed.liveKey}`)).not.toBeNull();
    // A plain SQL update from another connection: nothing in this process is told directly.
    await other`update secret_keys set revoked_at = now() where id = ${seed.live.id}`;
    await waitUntil(
      "the revoked key to be refused",
      async () => (await resolveSecretKey(deps, `Bearer ${seed.liveKey}`)) === null,
      { stepMs: 10 },
    );
  });
});
