import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AdminResult, parseAdmin, runAdmin } from "../../src/cli/admin.ts";
import { createTestContext, type TestContext } from "../helpers/app.ts";
import { TEST_DATABASE } from "../helpers/db.ts";
import { expectApiError } from "../helpers/errors.ts";
import { count } from "./support.ts";

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

function run(...argv: string[]): Promise<AdminResult> {
  return runAdmin(argv, ctx.deps);
}

/** Runs a command that must succeed and returns its parsed JSON answer. */
async function ok(...argv: string[]) {
  const r = await run(...argv);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
  return JSON.parse(r.stdout);
}

/** Runs a command that must fail with exit 1 and returns the parsed error. */
async function refused(...argv: string[]) {
  const r = await run(...argv);
  expect(r.code).toBe(1);
  expect(r.stdout).toBe("");
  return JSON.parse(r.stderr).error as { code: string; message: string; param?: string };
}

/** A usage error: exit 2, nothing on stdout, the error JSON on stderr, and no database needed. */
function usage(...argv: string[]) {
  const r = parseAdmin(argv);
  expect("code" in r && r.code).toBe(2);
  const result = r as AdminResult;
  expect(result.stdout).toBe("");
  const error = JSON.parse(result.stderr).error as { code: string; message: string; param?: string };
  expect(error.code).toBe("usage_error");
  return error;
}

describe("commands through runAdmin", () => {
  test("create-organization, update-organization, list-organizations", async () => {
    const org = await ok(
      "create-organization",
      "--name",
      "Acme",
      "--paid-plan",
      "true",
      "--plan-minutes",
      "250",
    );
    expect(org).toMatchObject({ name: "Acme", paidPlan: true, planMinutes: 250 });
    expect(Object.keys(org).sort()).toEqual([
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
    const defaults = await ok("create-organization", "--name=Plain");
    expect(defaults).toMatchObject({ name: "Plain", paidPlan: false, planMinutes: 0 });

    const updated = await ok("update-organization", org.id, "--plan-minutes", "0", "--paid-plan", "false");
    expect(updated).toEqual({ ...org, paidPlan: false, planMinutes: 0 });
    const renamed = await ok("update-organization", "--name", "Acme Inc.", org.id);
    expect(renamed).toEqual({ ...updated, name: "Acme Inc." });

    const list = await ok("list-organizations");
    expect(list.data.map((o: { id: string }) => o.id)).toEqual([defaults.id, org.id]);
    expect(list.has_more).toBe(false);
    const first = await ok("list-organizations", "--limit", "1");
    expect(first).toEqual({ data: [list.data[0]], has_more: true });
    const second = await ok("list-organizations", "--limit", "1", "--starting-after", defaults.id);
    expect(second).toEqual({ data: [list.data[1]], has_more: false });
    expect(await ok("get-organization", org.id)).toEqual({
      ...list.data[1],
      usage: { month: expect.stringMatching(/^\d{4}-\d{2}$/), planMinutesUsed: 0 },
    });
  });

  test('carrier settings: every flag, JSON for the call window, "" clears a setting', async () => {
    const org = await ok(
      "create-organization",
      "--name",
      "Carrier Co",
      "--sip-trunk-id",
      "ST_abc123",
      "--caller-number",
      "+33180000000",
      "--allowed-countries",
      "fr, be",
      "--call-window",
      '{"start":"09:00","end":"20:00","timeZone":"Europe/Paris","days":[5,1,1]}',
      "--max-concurrent-calls",
      "3",
      "--max-calls-per-hour",
      "50",
    );
    expect(org).toMatchObject({
      sipTrunkId: "ST_abc123",
      callerNumber: "+33180000000",
      allowedCountries: ["BE", "FR"],
      callWindow: { start: "09:00", end: "20:00", timeZone: "Europe/Paris", days: [1, 5] },
      maxConcurrentCalls: 3,
      maxCallsPerHour: 50,
    });
    const cleared = await ok(
      "update-organization",
      org.id,
      "--sip-trunk-id",
      "",
      "--allowed-countries",
      "",
      "--call-window",
      "",
    );
    expect(cleared).toEqual({ ...org, sipTrunkId: null, allowedCountries: null, callWindow: null });
    const tz = await refused(
      "update-organization",
      org.id,
      "--call-window",
      '{"start":"09:00","end":"20:00","timeZone":"Mars/Olympus"}',
    );
    expect(tz).toMatchObject({ code: "invalid_request", param: "callWindow.timeZone" });
    const json = await refused("update-organization", org.id, "--call-window", "{nope");
    expect(json).toMatchObject({ code: "invalid_request", param: "callWindow" });
  });

  test("create-agent, update-agent, list-agents", async () => {
    const org = await ok("create-organization", "--name", "Agents Co");
    const agent = await ok("create-agent", "--organization", org.id, "--name", "Reception", "--active");
    expect(agent).toMatchObject({ organizationId: org.id, name: "Reception", active: true, language: "en" });
    const fr = await ok(
      "create-agent",
      "--organization",
      org.id,
      "--name",
      "Accueil",
      "--active",
      "false",
      "--livekit-agent-name",
      "accueil-bot",
      "--language",
      "fr",
    );
    expect(fr).toMatchObject({ active: false, livekitAgentName: "accueil-bot", language: "fr" });

    const on = await ok("update-agent", fr.id, "--active", "--livekit-agent-name", "");
    expect(on).toEqual({ ...fr, active: true, livekitAgentName: null });
    const off = await ok("update-agent", fr.id, "--active=false", "--name", "Accueil (nuit)");
    expect(off).toEqual({ ...on, active: false, name: "Accueil (nuit)" });

    const list = await ok("list-agents", "--organization", org.id);
    expect(list.data.map((a: { id: string }) => a.id)).toEqual([fr.id, agent.id]);
    expect(list.has_more).toBe(false);
  });

  test("create-secret-key (with agent restriction) and revoke-secret-key; the revoked key stops working", async () => {
    const org = await ok("create-organization", "--name", "Keys Co");
    const a = await ok("create-agent", "--organization", org.id, "--name", "A");
    const b = await ok("create-agent", "--organization", org.id, "--name", "B");
    const key = await ok(
      "create-secret-key",
      "--organization",
      org.id,
      "--mode",
      "test",
      "--scopes",
      "agents:read, calls:read",
      "--agent-ids",
      `${b.id},${a.id}`,
    );
    expect(key).toMatchObject({
      mode: "test",
      scopes: ["agents:read", "calls:read"],
      agentIds: [b.id, a.id],
    });
    expect(key.key).toMatch(/^inf_test_[0-9A-Za-z]{43}$/);
    expect((await ctx.request("/api/v1/agents", { key: key.key })).status).toBe(200);

    const revoked = await ok("revoke-secret-key", key.id);
    expect(revoked).toMatchObject({ id: key.id, revoked: true });
    expect(revoked.key).toBeUndefined();
    const after = await ctx.request("/api/v1/agents", { key: key.key });
    await expectApiError(after, 401, "invalid_key");
  });

  test("create-publishable-key and revoke-publishable-key", async () => {
    const org = await ok("create-organization", "--name", "Widget Co");
    const agent = await ok("create-agent", "--organization", org.id, "--name", "Web");
    const key = await ok(
      "create-publishable-key",
      "--organization",
      org.id,
      "--agent",
      agent.id,
      "--origins",
      "https://www.example.com,https://shop.example.com/",
      "--monthly-minute-cap",
      "60",
    );
    expect(key).toMatchObject({
      agentId: agent.id,
      allowedOrigins: ["https://www.example.com", "https://shop.example.com"],
      monthlyMinuteCap: 60,
    });
    expect(key.key).toMatch(/^inf_pub_[0-9A-Za-z]{43}$/);
    const revoked = await ok("revoke-publishable-key", key.id);
    expect(revoked).toMatchObject({ id: key.id, revoked: true });
    const [row] = await ctx.deps.sql`select revoked_at from publishable_keys where id = ${key.id}`;
    expect(row!.revoked_at).toBeInstanceOf(Date);
  });

  test("a shortened flag also answers to its field's own name: --agent-id, --allowed-origins, --knowledge-base-ids, --organization-id", async () => {
    const org = await ok("create-organization", "--name", "Aliased Co");
    const kb = await ok("create-knowledge-base", "--organization-id", org.id, "--name", "FAQ");
    const agent = await ok(
      "create-agent",
      "--organization-id",
      org.id,
      "--name",
      "Web",
      "--knowledge-base-ids",
      kb.id,
    );
    expect(agent).toMatchObject({ organizationId: org.id, knowledgeBaseIds: [kb.id] });
    const key = await ok(
      "create-publishable-key",
      `--organization-id=${org.id}`,
      "--agent-id",
      agent.id,
      "--allowed-origins",
      "https://www.example.com",
      "--monthly-minute-cap",
      "5",
    );
    expect(key).toMatchObject({ agentId: agent.id, allowedOrigins: ["https://www.example.com"] });
    // Both names of one flag are one flag given twice.
    expect(
      usage("create-publishable-key", "--organization", org.id, "--agent", agent.id, "--agent-id", agent.id),
    ).toMatchObject({ message: expect.stringContaining("--agent is given twice"), param: "--agent" });
    // The help names one way.
    const help = parseAdmin(["help", "create-publishable-key"]) as AdminResult;
    expect(help.stdout).toContain("--agent <agent-id>");
    expect(help.stdout).not.toContain("--agent-id ");
  });

  test("list-secret-keys: newest first, revoked ones included, never the key, in pages", async () => {
    const org = await ok("create-organization", "--name", "Listed Keys Co");
    const agent = await ok("create-agent", "--organization", org.id, "--name", "A");
    const first = await ok("create-secret-key", "--organization", org.id, "--mode", "live", "--scopes", "*");
    const second = await ok(
      "create-secret-key",
      "--organization",
      org.id,
      "--mode",
      "test",
      "--scopes",
      "calls:read",
      "--agent-ids",
      agent.id,
    );
    await ok("revoke-secret-key", first.id);
    const list = await ok("list-secret-keys", "--organization", org.id);
    expect(list.has_more).toBe(false);
    expect(list.data.map((k: { id: string; revoked: boolean }) => [k.id, k.revoked])).toEqual([
      [second.id, false],
      [first.id, true],
    ]);
    for (const [item, created] of [
      [list.data[0], second],
      [list.data[1], first],
    ]) {
      const { key, ...rest } = created;
      expect(item).toMatchObject({ ...rest, lastUsedAt: null });
      // Its first characters, then an ellipsis.
      expect(item.start).toBe(`${key.slice(0, item.start.length - 1)}…`);
      expect(JSON.stringify(item)).not.toContain(key);
    }
    expect(list.data[1].revokedAt).toEqual(expect.any(String));
    const page = await ok("list-secret-keys", "--organization", org.id, "--limit", "1");
    expect({ ids: page.data.map((k: { id: string }) => k.id), more: page.has_more }).toEqual({
      ids: [second.id],
      more: true,
    });
    const next = await ok(
      "list-secret-keys",
      "--organization",
      org.id,
      "--limit",
      "1",
      "--starting-after",
      second.id,
    );
    expect({ ids: next.data.map((k: { id: string }) => k.id), more: next.has_more }).toEqual({
      ids: [first.id],
      more: false,
    });
  });

  test("list-publishable-keys: newest first, revoked ones included, never the key, minutes this month, in pages", async () => {
    const org = await ok("create-organization", "--name", "Listed Widgets Co");
    const agent = await ok("create-agent", "--organization", org.id, "--name", "Web");
    const create = (origin: string) =>
      ok(
        "create-publishable-key",
        "--organization",
        org.id,
        "--agent",
        agent.id,
        "--origins",
        origin,
        "--monthly-minute-cap",
        "60",
      );
    const first = await create("https://one.example.com");
    const second = await create("https://two.example.com");
    await ok("revoke-publishable-key", second.id);
    const list = await ok("list-publishable-keys", "--organization", org.id);
    expect(list.has_more).toBe(false);
    expect(list.data.map((k: { id: string; revoked: boolean }) => [k.id, k.revoked])).toEqual([
      [second.id, true],
      [first.id, false],
    ]);
    for (const [item, created] of [
      [list.data[0], second],
      [list.data[1], first],
    ]) {
      const { key, ...rest } = created;
      expect(item).toMatchObject({ ...rest, minutesUsedThisMonth: 0, lastUsedAt: null });
      // Its first characters, then an ellipsis.
      expect(item.start).toBe(`${key.slice(0, item.start.length - 1)}…`);
      expect(JSON.stringify(item)).not.toContain(key);
    }
    const page = await ok("list-publishable-keys", "--organization", org.id, "--limit", "1");
    expect({ ids: page.data.map((k: { id: string }) => k.id), more: page.has_more }).toEqual({
      ids: [second.id],
      more: true,
    });
    const next = await ok(
      "list-publishable-keys",
      "--organization",
      org.id,
      "--limit",
      "1",
      "--starting-after",
      second.id,
    );
    expect({ ids: next.data.map((k: { id: string }) => k.id), more: next.has_more }).toEqual({
      ids: [first.id],
      more: false,
    });
  });

  test("create-knowledge-base", async () => {
    const org = await ok("create-organization", "--name", "KB Co");
    const kb = await ok("create-knowledge-base", "--organization", org.id, "--name", "FAQ");
    expect(kb).toMatchObject({ organizationId: org.id, name: "FAQ" });
    expect(kb.id).toMatch(/^kb_/);
  });
});

describe("refusals: the API's error on stderr, exit 1, nothing written", () => {
  test("unknown ids are not_found", async () => {
    const before = await count(ctx, "agents");
    expect(
      (await refused("create-agent", "--organization", "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "--name", "X")).code,
    ).toBe("not_found");
    expect((await refused("update-organization", "nope", "--name", "X")).code).toBe("not_found");
    expect((await refused("update-agent", "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "--active")).code).toBe(
      "not_found",
    );
    expect((await refused("revoke-secret-key", "key_01JD8Y3M6W9Q2T4V5X7Z8A9B0C")).code).toBe("not_found");
    expect((await refused("revoke-publishable-key", "x")).code).toBe("not_found");
    expect((await refused("list-agents", "--organization", "org_x")).code).toBe("not_found");
    expect((await refused("get-organization", "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C")).code).toBe("not_found");
    expect(await count(ctx, "agents")).toBe(before);
  });

  test("a list's bad query is invalid_query, a cursor outside the list invalid_cursor", async () => {
    expect(await refused("list-organizations", "--limit", "0")).toMatchObject({
      code: "invalid_query",
      param: "limit",
    });
    expect(await refused("list-organizations", "--starting-after", "nope")).toMatchObject({
      code: "invalid_query",
      param: "starting_after",
    });
    const org = await ok("create-organization", "--name", "Cursor Co");
    expect(
      await refused("list-secret-keys", "--organization", org.id, "--starting-after", org.id),
    ).toMatchObject({ code: "invalid_cursor", param: "starting_after" });
  });

  test("validation errors carry the same message and param as the API", async () => {
    const org = await ok("create-organization", "--name", "Strict Co");
    const agent = await ok("create-agent", "--organization", org.id, "--name", "A");
    const other = await ok("create-organization", "--name", "Foreign Co");
    const foreign = await ok("create-agent", "--organization", other.id, "--name", "Theirs");
    const before = await Promise.all(
      ["organizations", "agents", "secret_keys", "publishable_keys"].map((t) => count(ctx, t)),
    );

    expect(await refused("create-organization", "--name", "X", "--paid-plan", "yes")).toMatchObject({
      code: "invalid_request",
      param: "paidPlan",
    });
    expect(await refused("create-organization", "--name", "X", "--plan-minutes", "-1")).toMatchObject({
      code: "invalid_request",
      param: "planMinutes",
    });
    expect(await refused("create-organization", "--name", "X", "--plan-minutes", "many")).toMatchObject({
      code: "invalid_request",
      param: "planMinutes",
    });
    expect(await refused("create-organization", "--name", "")).toMatchObject({ param: "name" });
    expect(
      await refused("create-agent", "--organization", org.id, "--name", "B", "--language", "fr_CA"),
    ).toMatchObject({
      code: "invalid_request",
      param: "language",
    });
    const origin = await refused(
      "create-publishable-key",
      "--organization",
      org.id,
      "--agent",
      agent.id,
      "--origins",
      "http://www.example.com",
      "--monthly-minute-cap",
      "5",
    );
    expect(origin).toMatchObject({ code: "invalid_request", param: "allowedOrigins.0" });
    const cap = await refused(
      "create-publishable-key",
      "--organization",
      org.id,
      "--agent",
      agent.id,
      "--origins",
      "https://www.example.com",
      "--monthly-minute-cap",
      "0",
    );
    expect(cap).toMatchObject({ code: "invalid_request", param: "monthlyMinuteCap" });
    const scope = await refused(
      "create-secret-key",
      "--organization",
      org.id,
      "--mode",
      "live",
      "--scopes",
      "*,root",
    );
    expect(scope).toMatchObject({ code: "invalid_request", param: "scopes.1" });
    const agents = await refused(
      "create-secret-key",
      "--organization",
      org.id,
      "--mode",
      "live",
      "--scopes",
      "*",
      "--agent-ids",
      foreign.id,
    );
    expect(agents).toMatchObject({ code: "not_found", param: "agentIds" });
    const pubAgent = await refused(
      "create-publishable-key",
      "--organization",
      org.id,
      "--agent",
      foreign.id,
      "--origins",
      "https://www.example.com",
      "--monthly-minute-cap",
      "5",
    );
    expect(pubAgent).toMatchObject({ code: "not_found", param: "agentId" });
    const after = await Promise.all(
      ["organizations", "agents", "secret_keys", "publishable_keys"].map((t) => count(ctx, t)),
    );
    expect(after).toEqual(before);
  });
});

describe("usage", () => {
  test("help lists every command on stdout with exit 0", () => {
    for (const argv of [["help"], ["--help"]]) {
      const r = parseAdmin(argv) as AdminResult;
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      for (const name of [
        "create-organization",
        "update-organization",
        "list-organizations",
        "create-agent",
        "update-agent",
        "create-secret-key",
        "create-publishable-key",
        "revoke-secret-key",
        "revoke-publishable-key",
        "create-knowledge-base",
      ]) {
        expect(r.stdout).toContain(`  ${name}`);
      }
    }
  });

  test("help for one command, either way", () => {
    for (const argv of [
      ["help", "create-publishable-key"],
      ["create-publishable-key", "--help"],
    ]) {
      const r = parseAdmin(argv) as AdminResult;
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("--monthly-minute-cap <n>");
      expect(r.stdout).toContain("--origins");
    }
  });

  test("usage errors exit 2 with the faulty option as param", () => {
    expect(usage().message).toContain("Missing command");
    expect(usage("create-org").message).toContain('Unknown command "create-org"');
    expect(usage("help", "nope").message).toContain('Unknown command "nope"');
    expect(usage("create-organization", "--nme", "Acme")).toMatchObject({ param: "--nme" });
    expect(usage("create-organization", "--name")).toMatchObject({ param: "--name" });
    expect(usage("create-organization", "--name", "--paid-plan")).toMatchObject({ param: "--name" });
    expect(usage("create-organization", "--paid-plan", "true")).toMatchObject({ param: "--name" });
    expect(usage("create-organization", "--name", "A", "--name", "B")).toMatchObject({ param: "--name" });
    expect(usage("create-organization", "--name", "A", "extra").message).toContain(
      'Unexpected argument "extra"',
    );
    expect(usage("update-organization", "--name", "A").message).toContain("Missing <org-id>");
    expect(usage("update-organization", "org_a", "org_b").message).toContain('Unexpected argument "org_b"');
    expect(usage("revoke-secret-key").message).toContain("Missing <key-id>");
    expect(usage("create-agent", "--name", "A")).toMatchObject({ param: "--organization" });
    expect(usage("create-secret-key", "--organization", "org_x", "--mode", "live")).toMatchObject({
      param: "--scopes",
    });
    expect(
      usage(
        "create-publishable-key",
        "--organization",
        "o",
        "--agent",
        "a",
        "--origins",
        "https://a.example.com",
      ),
    ).toMatchObject({ param: "--monthly-minute-cap" });
    expect(usage("list-organizations", "--all")).toMatchObject({ param: "--all" });
    expect(usage("toString").message).toContain("Unknown command");
    expect(usage("help", "constructor").message).toContain("Unknown command");
    expect(usage("create-organization", "--constructor", "x")).toMatchObject({ param: "--constructor" });
  });

  test("runAdmin returns usage errors without touching the database", async () => {
    const r = await runAdmin(["nope"], { ...ctx.deps, sql: null as never });
    expect(r.code).toBe(2);
  });
});

describe("the real executable", () => {
  const root = join(import.meta.dir, "..", "..");
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), "vs-admin-cli-"));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  /** The child's environment: this test database (PostgreSQL), or its own embedded one in a fresh folder. */
  function childEnv(): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    delete env.DATABASE_URL;
    env.DATA_DIR = dataDir;
    env.LOG_LEVEL = "debug";
    if (TEST_DATABASE === "postgres") env.DATABASE_URL = ctx.db.url!;
    return env;
  }

  async function spawn(...args: string[]) {
    const child = Bun.spawn([process.execPath, "src/main.ts", "admin", ...args], {
      cwd: root,
      env: childEnv(),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    return { stdout, stderr, code };
  }

  test("`voice-service admin create-organization …` prints only the JSON answer and exits 0", async () => {
    const r = await spawn(
      "create-organization",
      "--name",
      "From the shell",
      "--paid-plan",
      "true",
      "--plan-minutes",
      "30",
    );
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
    const org = JSON.parse(r.stdout);
    expect(org).toMatchObject({ name: "From the shell", paidPlan: true, planMinutes: 30 });
    expect(org.id).toMatch(/^org_[0-9A-HJKMNP-TV-Z]{26}$/);
    if (TEST_DATABASE === "postgres") {
      const [row] = await ctx.deps
        .sql`select name, paid_plan, plan_minutes from organizations where id = ${org.id}`;
      expect(row).toEqual({ name: "From the shell", paid_plan: true, plan_minutes: 30 });
    }
  });

  test("a refusal exits 1 with the error JSON on stderr; a usage error exits 2", async () => {
    const refusedRun = await spawn("update-organization", "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "--name", "X");
    expect(refusedRun.code).toBe(1);
    expect(refusedRun.stdout).toBe("");
    expect(JSON.parse(refusedRun.stderr).error.code).toBe("not_found");
    const usageRun = await spawn("create-organization");
    expect(usageRun.code).toBe(2);
    expect(usageRun.stdout).toBe("");
    expect(JSON.parse(usageRun.stderr).error).toMatchObject({ code: "usage_error", param: "--name" });
  });
});
