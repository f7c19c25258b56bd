import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serverCommand } from "./support.ts";

/**
 * How the process starts, or refuses to: help, and fatal errors as log lines on stdout, before the
 * database is touched when the environment is at fault.
 */

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "vs-startup-"));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const RUNTIME_ENV = { DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" };

/** Runs the service to its end; its own embedded database folder, never created unless it gets that far. */
async function run(args: string[], env: Record<string, string> = {}) {
  const dataDir = join(scratch, crypto.randomUUID());
  const childEnv: Record<string, string | undefined> = {
    ...process.env,
    LOG_LEVEL: "info",
    ...RUNTIME_ENV,
    DATA_DIR: dataDir,
    PORT: "0",
    ...env,
  };
  if (!env.DATABASE_URL) delete childEnv.DATABASE_URL;
  const child = Bun.spawn([...serverCommand(), ...args], {
    env: childEnv,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  return { code, stdout, stderr, dataDir };
}

/** The JSON lines of stdout; every line must be one. */
function jsonLines(stdout: string): Record<string, unknown>[] {
  return stdout
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

function expectFatal(lines: Record<string, unknown>[], error: RegExp) {
  const fatal = lines.at(-1)!;
  expect(fatal).toMatchObject({ level: "error", msg: "fatal" });
  expect(Number.isNaN(Date.parse(String(fatal.time)))).toBe(false);
  expect(String(fatal.error)).toMatch(error);
}

describe("help", () => {
  test.each([["--help"], ["-h"], ["help"]])(
    "`voice-service %s` prints the usage and exits 0",
    async (arg) => {
      // Even with a broken environment: help needs none.
      const r = await run([arg], { PORT: "banana" });
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      for (const word of ["serve", "migrate", "admin", "--version", "--help"])
        expect(r.stdout).toContain(word);
      expect(existsSync(r.dataDir)).toBe(false);
    },
  );

  test("an unknown command is still a usage error (exit 2) that points to the help", async () => {
    const r = await run(["srve"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown command: srve");
    expect(r.stderr).toContain("--help");
  });
});

describe("admin", () => {
  test("its help needs no environment; a bad environment is its error JSON on stderr, stdout kept for answers", async () => {
    const help = await run(["admin", "help"], { PORT: "1e3" });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("create-organization");
    const refused = await run(["admin", "list-organizations"], { PORT: "1e3" });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe("");
    expect(JSON.parse(refused.stderr).error).toMatchObject({
      code: "internal_error",
      message: expect.stringMatching(/^invalid environment: PORT must be a whole number/),
    });
    expect(existsSync(refused.dataDir)).toBe(false);
  });
});

describe("fatal start-up errors", () => {
  test("a bad environment: one JSON log line on stdout with time, level and msg; exit 1; nothing on stderr", async () => {
    const r = await run(["serve"], { PORT: " " });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("");
    const lines = jsonLines(r.stdout);
    expect(lines).toHaveLength(1);
    expectFatal(lines, /^invalid environment: PORT is only whitespace/);
    const hex = await run(["serve"], { PORT: "0x1F90" });
    expect(hex.code).toBe(1);
    expectFatal(jsonLines(hex.stdout), /^invalid environment: PORT must be a whole number/);
  });

  test("a bad TRUST_PROXY is refused before the database is opened", async () => {
    const r = await run(["serve"], { TRUST_PROXY: "10.0.0.0/8, banana" });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("");
    const lines = jsonLines(r.stdout);
    expect(lines).toHaveLength(1);
    expectFatal(lines, /^invalid environment: TRUST_PROXY: "banana" is not an address or CIDR/);
    expect(existsSync(r.dataDir)).toBe(false);
    // The same for the other commands, which read the same environment.
    const migrate = await run(["migrate"], { TRUST_PROXY: "300.0.0.1" });
    expect(migrate.code).toBe(1);
    expectFatal(jsonLines(migrate.stdout), /TRUST_PROXY: "300\.0\.0\.1"/);
    expect(existsSync(migrate.dataDir)).toBe(false);
  });

  test("an ADMIN_TOKEN that could never authenticate is refused at start, without echoing it", async () => {
    const token = `${"a".repeat(20)} ${"b".repeat(20)}`;
    const r = await run(["serve"], { ADMIN_TOKEN: token });
    expect(r.code).toBe(1);
    expectFatal(jsonLines(r.stdout), /ADMIN_TOKEN must be printable ASCII/);
    expect(r.stdout).not.toContain(token);
    expect(existsSync(r.dataDir)).toBe(false);
  });

  test("an unreachable database: fatal line on stdout, after the warning naming LiveKit's missing variables", async () => {
    const r = await run(["serve"], {
      DATABASE_URL: "postgres://voice:secret@127.0.0.1:1/nothing",
      LIVEKIT_URL: "wss://media.example.com",
      LIVEKIT_API_KEY: "APIkey-value-not-to-log",
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("");
    const lines = jsonLines(r.stdout);
    const warning = lines.find((l) => String(l.msg).includes("LiveKit"));
    expect(warning).toMatchObject({ level: "warn", missing: ["LIVEKIT_API_SECRET"] });
    expect(r.stdout).not.toContain("APIkey-value-not-to-log");
    expect(r.stdout).not.toContain("media.example.com");
    expectFatal(lines, /./);
  });
});
