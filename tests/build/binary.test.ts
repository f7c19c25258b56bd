import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { spawnService, stopService } from "../db/serviceProcess.ts";

// `npm run build`, then the executable alone in an empty folder: no node_modules, no sources.
const root = join(import.meta.dir, "..", "..");
const work = mkdtempSync(join(tmpdir(), "vs-binary-"));
const built = join(work, "build", "voice-service");
const folder = join(work, "run");
const binary = join(folder, "voice-service");
const run = (args: string[], env: Record<string, string> = {}) =>
  spawnService(args, { command: [binary], cwd: folder, env });

beforeAll(async () => {
  const build = Bun.spawn([process.execPath, join(root, "src", "build.ts")], {
    cwd: root,
    env: { ...process.env, BUILD_OUTFILE: built },
    stdout: "pipe",
    stderr: "pipe",
  });
  if ((await build.exited) !== 0) {
    throw new Error(`build failed: ${await new Response(build.stderr).text()}`);
  }
  mkdirSync(folder);
  copyFileSync(built, binary);
  chmodSync(binary, 0o755);
  // Compiling the executable (bundle, widget, embedded database files) takes minutes on a busy
  // machine: more than the suite's timeout (tests/run.ts).
}, 180_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("single executable", () => {
  test("--version prints the package version", async () => {
    const p = run(["--version"]);
    expect(await p.exited).toBe(0);
    expect(p.output().trim()).toBe(pkg.version);
  });

  test("migrate creates the embedded database in DATA_DIR from the files inside the executable", async () => {
    const p = run(["migrate"], { DATA_DIR: "./data", LOG_LEVEL: "debug" });
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain(`{"applied":["0001_init"`);
    // PGlite's engine is read from the executable's own file system, not from node_modules.
    expect(p.output()).toContain(`"engine":"/$bunfs/`);
    expect(p.output()).not.toContain("initialising the embedded database template");
    expect(readdirSync(join(folder, "data")).sort()).toEqual(["pgdata"]);
    expect(readdirSync(folder).sort()).toEqual(["data", "voice-service"]);
  });

  test.skipIf(!Bun.which("strace"))(
    "opens no file outside its folder's DATA_DIR and the system",
    async () => {
      const trace = join(work, "trace");
      const p = spawnService(["-f", "-e", "trace=%file", "-o", trace, binary, "migrate"], {
        command: ["strace"],
        cwd: folder,
        env: { DATA_DIR: "./data-traced" },
      });
      expect(await p.exited).toBe(0);
      const lines = readFileSync(trace, "utf8");
      expect(lines).not.toContain("node_modules");
      expect(lines).not.toContain(root);
    },
  );

  test("serve listens on PORT=0, answers /api/openapi.json, and exits 0 on SIGTERM within 10 s", async () => {
    const p = run(["serve"], { DATA_DIR: "./data", PORT: "0" });
    const url = await p.listening();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${url}/api/openapi.json`);
    expect(res.status).toBe(200);
    expect((await res.json()).openapi).toBe("3.1.0");
    // The docs page, its assets and both widget scripts travel inside the executable.
    const docs = await fetch(`${url}/api/docs`);
    expect(docs.status).toBe(200);
    const assets = [...(await docs.text()).matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThan(0);
    for (const asset of assets.filter((a) => !a.startsWith("data:"))) {
      expect((await fetch(new URL(asset, `${url}/api/docs`))).status).toBe(200);
    }
    for (const script of ["/widget/v1.js", "/widget/v1/media.js"]) {
      const js = await fetch(`${url}${script}`);
      expect(js.status).toBe(200);
      expect(js.headers.get("content-type")).toStartWith("text/javascript");
      expect((await js.text()).length).toBeGreaterThan(1000);
    }
    const { code, ms } = await stopService(p);
    expect(code).toBe(0);
    expect(ms).toBeLessThan(10_000);
    expect(existsSync(join(folder, "data", "voice-service.lock"))).toBe(false);
  });

  test("admin commands run straight on the embedded database and print JSON", async () => {
    const create = run(["admin", "create-organization", "--name", "Binary Inc", "--paid-plan", "true"], {
      DATA_DIR: "./data",
    });
    expect(await create.exited).toBe(0);
    const org = JSON.parse(create.output());
    expect(org).toMatchObject({ name: "Binary Inc", paidPlan: true });
    expect(org.id).toMatch(/^org_[0-9A-HJKMNP-TV-Z]{26}$/);
    const list = run(["admin", "list-organizations"], { DATA_DIR: "./data" });
    expect(await list.exited).toBe(0);
    expect(list.output()).toContain(org.id);
  });
});
