import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import type { SecretKeyAuth } from "../../src/auth/access.ts";
import { GenerationCache } from "../../src/caches.ts";
import { evictOnChanges } from "../../src/compose.ts";
import type { Deps } from "../../src/deps.ts";
import { resolveSecretKey } from "../../src/http/secretKey.ts";
import { createAgent, listAgentsForKey, updateAgent } from "../../src/services/agents.ts";
import { createTestContext, depsFor, seedOrganization, type TestContext } from "../helpers/app.ts";
import { createTestDatabase, TEST_DATABASE, type TestDatabase } from "../helpers/db.ts";
import { waitUntil } from "../helpers/wait.ts";

/**
 * `GET /v1/agents` is served from a per-organization cache of the agents (Deps.agentLists). A change made in
 * this process evicts it at once; with PostgreSQL, a change made anywhere evicts it by notification.
 */

const authOf = async (deps: Deps, key: string): Promise<SecretKeyAuth> =>
  (await resolveSecretKey(deps, `Bearer ${key}`))!;

const names = async (ctx: TestContext, key: string) =>
  (
    (await (await ctx.request("/api/v1/agents", { key })).json()) as {
      agents: { name: string; active: boolean }[];
    }
  ).agents;

describe("the agents of an organization, cached", () => {
  let ctx: TestContext;
  let seed: Awaited<ReturnType<typeof seedOrganization>>;
  beforeAll(async () => {
    ctx = await createTestContext();
    seed = await seedOrganization(ctx);
  });
  afterAll(() => ctx.close());

  test("are read once, then served from memory", async () => {
    expect(await names(ctx, seed.testKey)).toHaveLength(1);
    const reads: string[] = [];
    const spy = {
      ...ctx.deps,
      sql: Object.assign((...args: Parameters<typeof ctx.deps.sql>) => {
        reads.push("read");
        return ctx.deps.sql(...args);
      }, ctx.deps.sql),
    } as typeof ctx.deps;
    const auth = await authOf(ctx.deps, seed.testKey);
    await listAgentsForKey(spy, auth);
    await listAgentsForKey(spy, auth);
    expect(reads).toEqual([]);
    // The spy sees the reads there are: after an eviction, one.
    ctx.deps.agentLists.evict(seed.org.id);
    await listAgentsForKey(spy, auth);
    await listAgentsForKey(spy, auth);
    expect(reads.length).toBeGreaterThan(0);
    const once = reads.length;
    await listAgentsForKey(spy, auth);
    expect(reads.length).toBe(once);
  });

  test("an agent created or changed in this process shows on the very next request", async () => {
    expect((await names(ctx, seed.testKey)).map((a) => a.name)).toEqual(["Reception"]);
    const sales = await createAgent(ctx.deps, seed.org.id, { name: "Sales" });
    expect((await names(ctx, seed.testKey)).map((a) => a.name)).toEqual(["Sales", "Reception"]);
    await updateAgent(ctx.deps, sales.id, { active: false });
    expect((await names(ctx, seed.testKey)).find((a) => a.name === "Sales")?.active).toBe(false);
  });

  test("a read that raced with a change is not kept", async () => {
    const cache = new GenerationCache<string>();
    const stale = cache.through("org_1", async () => {
      cache.evict("org_1"); // a change lands while the read runs
      return "before";
    });
    expect(await stale).toBe("before");
    expect(cache.get("org_1")).toBeUndefined();
    expect(await cache.through("org_1", async () => "after")).toBe("after");
    expect(cache.get("org_1")).toBe("after");
  });
});

describe.skipIf(TEST_DATABASE !== "postgres")("another process changes an agent", () => {
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

  test("the trigger's notification evicts the organization's cached agents in this process", async () => {
    const deps = depsFor(db.sql);
    const seed = await seedOrganization({ deps });
    await evictOnChanges(db.sql, deps);
    const auth = await authOf(deps, seed.testKey);
    expect((await listAgentsForKey(deps, auth)).agents[0]!.active).toBe(true);
    // A plain SQL update from another connection: nothing in this process is told directly.
    await other`update agents set active = false where id = ${seed.agent.id}`;
    await waitUntil(
      "the change to show",
      async () => (await listAgentsForKey(deps, auth)).agents[0]!.active === false,
      { stepMs: 10 },
    );
  });
});
