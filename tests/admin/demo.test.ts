import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/engine/connection.ts";
import { silentLogger } from "../../src/log.ts";
import {
  DEMO_CREDENTIALS_FILE,
  findDemo,
  prepareDemo,
  reachableUrl,
  seedDemo,
} from "../../src/services/demo.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { createTestContext, type TestContext } from "../helpers/app.ts";
import { createTestDatabase, TEST_DATABASE } from "../helpers/db.ts";
import { waitUntil } from "../helpers/wait.ts";
import { count } from "./support.ts";

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "vs-demo-"));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

/** Back to an empty database (one database per file keeps the embedded runs short). */
async function emptyDatabase() {
  await ctx.deps.sql`truncate organizations, settings cascade`;
}

describe("seeding on an empty database", () => {
  let dataDir: string;
  let banner: string;
  beforeAll(async () => {
    dataDir = join(tempDir(), "not-yet-created");
    // The rule of where a demo belongs is tested below; here, where it does.
    const render = await prepareDemo(ctx.deps, { dataDir, database: "embedded" });
    expect(render).not.toBeNull();
    banner = render!("http://127.0.0.1:8080");
  });

  function credentials() {
    return JSON.parse(readFileSync(join(dataDir, DEMO_CREDENTIALS_FILE), "utf8"));
  }

  test("creates one free organization, an active Demo agent and a test key with every scope", async () => {
    const demo = await findDemo(ctx.deps.sql);
    expect(demo).not.toBeNull();
    const orgs = await ctx.deps.sql`select id, paid_plan, plan_minutes from organizations`;
    expect([...orgs]).toEqual([{ id: demo!.organizationId, paid_plan: false, plan_minutes: 0 }]);
    const agents = await ctx.deps.sql`select id, organization_id, name, active from agents`;
    expect([...agents]).toEqual([
      { id: demo!.agentId, organization_id: demo!.organizationId, name: "Demo agent", active: true },
    ]);
    const keys = await ctx.deps.sql`select id, mode, scopes, agent_ids, revoked_at from secret_keys`;
    expect([...keys]).toEqual([
      { id: credentials().secretKey.id, mode: "test", scopes: ["*"], agent_ids: null, revoked_at: null },
    ]);
    expect(await count(ctx, "publishable_keys")).toBe(0);
  });

  test("the credentials file is owner-only and holds the working key", async () => {
    const path = join(dataDir, DEMO_CREDENTIALS_FILE);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const saved = credentials();
    const demo = await findDemo(ctx.deps.sql);
    expect(saved).toMatchObject({ organizationId: demo!.organizationId, agentId: demo!.agentId });
    expect(saved.secretKey.key).toMatch(/^inf_test_[0-9A-Za-z]{43}$/);
    const res = await ctx.request("/api/v1/agents", { key: saved.secretKey.key });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      agents: [expect.objectContaining({ id: demo!.agentId, name: "Demo agent", active: true })],
    });
  });

  test("the banner says where the key is and how to try it, without the key itself", () => {
    const saved = credentials();
    const path = join(dataDir, DEMO_CREDENTIALS_FILE);
    expect(banner).not.toContain(saved.secretKey.key);
    expect(banner).toContain(saved.secretKey.id);
    expect(banner).toContain(`in ${path} (readable only by you)`);
    expect(banner).toContain('curl -H "Authorization: Bearer $KEY" http://127.0.0.1:8080/api/v1/agents');
    expect(banner).toContain("POST /api/v1/calls with this key creates a simulated call");
  });

  test("the banner's command reads the key from the credentials file", async () => {
    const line = banner.split("\n").find((l) => l.trim().startsWith("KEY=$("))!;
    const command = line.trim().slice("KEY=$(".length, -1);
    const read = Bun.spawnSync(["sh", "-c", command]);
    expect(read.exitCode).toBe(0);
    expect(read.stdout.toString().trim()).toBe(credentials().secretKey.key);
  });

  test("the log says it happened without the key", () => {
    const logs = ctx.logs.join("\n");
    expect(logs).toContain("demo seeded");
    expect(logs).not.toContain(credentials().secretKey.key);
  });

  test("a second start seeds nothing and leaves the credentials file alone", async () => {
    const before = readFileSync(join(dataDir, DEMO_CREDENTIALS_FILE), "utf8");
    const counts = await Promise.all(["organizations", "agents", "secret_keys"].map((t) => count(ctx, t)));
    expect(await prepareDemo(ctx.deps, { dataDir, database: "embedded" })).toBeNull();
    expect(await seedDemo(ctx.deps)).toBeNull();
    expect(await Promise.all(["organizations", "agents", "secret_keys"].map((t) => count(ctx, t)))).toEqual(
      counts,
    );
    expect(readFileSync(join(dataDir, DEMO_CREDENTIALS_FILE), "utf8")).toBe(before);
  });
});

test("a database that already has an organization gets no demo", async () => {
  await emptyDatabase();
  await createOrganization(ctx.deps, { name: "Real customer" });
  const dataDir = tempDir();
  expect(await prepareDemo(ctx.deps, { dataDir, database: "embedded" })).toBeNull();
  expect(await findDemo(ctx.deps.sql)).toBeNull();
  expect(await count(ctx, "organizations")).toBe(1);
  expect(existsSync(join(dataDir, DEMO_CREDENTIALS_FILE))).toBe(false);
});

test("a DATABASE_URL database gets no demo unless DEMO=true", async () => {
  await emptyDatabase();
  const dataDir = tempDir();
  expect(await prepareDemo(ctx.deps, { dataDir, database: "postgres" })).toBeNull();
  expect(await count(ctx, "organizations")).toBe(0);
  expect(existsSync(join(dataDir, DEMO_CREDENTIALS_FILE))).toBe(false);
  const withDemo = { ...ctx.deps, env: { ...ctx.deps.env, DEMO: true } };
  expect(await prepareDemo(withDemo, { dataDir, database: "postgres" })).not.toBeNull();
  expect(await findDemo(ctx.deps.sql)).not.toBeNull();
  expect(existsSync(join(dataDir, DEMO_CREDENTIALS_FILE))).toBe(true);
});

test("with DEMO=true a database that has organizations but no demo gets one, once", async () => {
  await emptyDatabase();
  await createOrganization(ctx.deps, { name: "Real customer" });
  const dataDir = tempDir();
  const withDemo = { ...ctx.deps, env: { ...ctx.deps.env, DEMO: true } };
  expect(await prepareDemo(withDemo, { dataDir, database: "postgres" })).not.toBeNull();
  expect(await findDemo(ctx.deps.sql)).not.toBeNull();
  expect(await count(ctx, "organizations")).toBe(2);
  expect(existsSync(join(dataDir, DEMO_CREDENTIALS_FILE))).toBe(true);
  expect(await prepareDemo(withDemo, { dataDir, database: "postgres" })).toBeNull();
  expect(await count(ctx, "organizations")).toBe(2);
});

test("processes seeding one empty database at once create one demo", async () => {
  await emptyDatabase();
  // PostgreSQL: four independent pools, as four processes would have. Embedded: its one connection.
  const pools =
    TEST_DATABASE === "postgres"
      ? await Promise.all(
          [1, 2, 3, 4].map(() => openDatabase({ url: ctx.db.url!, dataDir: "", log: silentLogger, max: 1 })),
        )
      : [ctx.db, ctx.db, ctx.db, ctx.db];
  try {
    const results = await Promise.all(pools.map((p) => seedDemo({ ...ctx.deps, sql: p.sql })));
    expect(results.filter((r) => r !== null)).toHaveLength(1);
    expect(await count(ctx, "organizations")).toBe(1);
    expect(await findDemo(ctx.deps.sql)).toMatchObject({
      organizationId: results.find((r) => r)!.organizationId,
    });
  } finally {
    if (TEST_DATABASE === "postgres") await Promise.all(pools.map((p) => p.close()));
  }
});

test("reachableUrl turns wildcard hosts into loopback addresses", () => {
  expect(reachableUrl("0.0.0.0", 8080)).toBe("http://127.0.0.1:8080");
  expect(reachableUrl("::", 81)).toBe("http://[::1]:81");
  expect(reachableUrl("127.0.0.1", 3000)).toBe("http://127.0.0.1:3000");
  expect(reachableUrl("example.internal", 80)).toBe("http://example.internal:80");
});

describe("`serve` on an empty database", () => {
  const root = join(import.meta.dir, "..", "..");

  /** Starts the server, waits until it listens (and the banner, if any, is out), stops it with SIGTERM. */
  async function startAndStop(env: Record<string, string>, expectBanner: boolean) {
    const child = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
      cwd: root,
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    let stdout = "";
    let stderr = "";
    const pump = async (stream: ReadableStream<Uint8Array>, add: (s: string) => void) => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) add(decoder.decode(chunk, { stream: true }));
    };
    const pumping = Promise.all([
      pump(child.stdout, (s) => {
        stdout += s;
      }),
      pump(child.stderr, (s) => {
        stderr += s;
      }),
    ]);
    try {
      await waitUntil(
        () => `the listening line${expectBanner ? " and the banner" : ""}, or an exit:\n${stdout}\n${stderr}`,
        () =>
          (stdout.includes('"msg":"listening"') && (!expectBanner || stderr.includes("simulated call"))) ||
          child.exitCode !== null,
        // A fresh embedded database (template, migrations, seed) can take half a minute on a busy machine.
        { timeoutMs: 45_000, stepMs: 25 },
      );
    } finally {
      child.kill("SIGTERM");
    }
    const code = await child.exited;
    await pumping;
    return { stdout, stderr, code };
  }

  function serveEnv(dataDir: string, db: { url: string | null } | null, extra: Record<string, string> = {}) {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    delete env.DATABASE_URL;
    delete env.DEMO;
    Object.assign(env, { PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "info" }, extra);
    if (db) env.DATABASE_URL = db.url!;
    return env;
  }

  test("prints the banner once on stderr (never the key, never on stdout); a restart does not seed again", async () => {
    const dataDir = tempDir();
    const db = TEST_DATABASE === "postgres" ? await createTestDatabase() : null;
    try {
      // On PostgreSQL a demo is seeded only when asked for.
      const env = serveEnv(dataDir, db, db ? { DEMO: "true" } : {});
      const first = await startAndStop(env, true);
      expect(first.code).toBe(0);
      const path = join(dataDir, DEMO_CREDENTIALS_FILE);
      const saved = JSON.parse(readFileSync(path, "utf8"));
      expect(statSync(path).mode & 0o777).toBe(0o600);
      const port = /"url":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(first.stdout)?.[1];
      expect(port).toBeDefined();
      expect(first.stderr).not.toContain(saved.secretKey.key);
      expect(first.stderr).toContain(path);
      expect(first.stderr).toContain(`http://127.0.0.1:${port}/api/v1/agents`);
      expect(first.stdout).not.toContain(saved.secretKey.key);
      for (const line of first.stdout.trim().split("\n")) expect(() => JSON.parse(line)).not.toThrow();

      const second = await startAndStop(env, false);
      expect(second.code).toBe(0);
      expect(second.stdout).toContain('"msg":"listening"');
      expect(second.stderr).not.toContain("Demo");
      expect(second.stdout).not.toContain("demo seeded");
      expect(JSON.parse(readFileSync(path, "utf8"))).toEqual(saved);
      if (db) {
        const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from organizations`;
        expect(row!.n).toBe(1);
      }
    } finally {
      await db?.close();
    }
  });

  test.if(TEST_DATABASE === "postgres")(
    "on a DATABASE_URL database without DEMO nothing is seeded",
    async () => {
      const dataDir = tempDir();
      const db = await createTestDatabase("postgres");
      try {
        const run = await startAndStop(serveEnv(dataDir, db), false);
        expect(run.code).toBe(0);
        expect(run.stdout).toContain('"msg":"listening"');
        expect(run.stderr).not.toContain("Demo");
        const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from organizations`;
        expect(row!.n).toBe(0);
        expect(existsSync(join(dataDir, DEMO_CREDENTIALS_FILE))).toBe(false);
      } finally {
        await db.close();
      }
    },
  );
});
