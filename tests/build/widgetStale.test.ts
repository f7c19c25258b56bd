import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readManifest, widgetSourceHash } from "../../src/widget/build.ts";

/**
 * `npm start` and `npm run start:deno` build the widget first when it is missing or stale
 * (`src/widget/write.ts --if-stale`), and leave a current build alone.
 */
const ROOT = join(import.meta.dir, "..", "..");
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs the script the start commands run, into `outDir`; whether it says it built. */
function writeIfStale(outDir: string): boolean {
  const run = Bun.spawnSync([process.execPath, "src/widget/write.ts", "--if-stale", outDir], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(run.exitCode).toBe(0);
  return run.stdout.toString().includes('"widget built"');
}

describe("the widget before the server starts", () => {
  test("both start commands build it when stale, then serve", () => {
    const scripts = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts;
    for (const name of ["start", "start:deno"]) {
      expect(scripts[name]).toStartWith("bun src/widget/write.ts --if-stale && ");
      expect(scripts[name]).toEndWith("src/main.ts serve");
    }
  });

  test("missing: built; current: left alone; other sources or a file gone: built again", () => {
    const outDir = join(mkdtempSync(join(tmpdir(), "widget-stale-")), "dist");
    dirs.push(outDir, join(outDir, ".."));

    expect(writeIfStale(outDir)).toBe(true);
    const manifest = readManifest(outDir)!;
    expect(manifest.source).toBe(widgetSourceHash());
    const v1 = join(outDir, "v1.js");
    const builtAt = statSync(v1).mtimeMs;

    expect(writeIfStale(outDir)).toBe(false);
    expect(statSync(v1).mtimeMs).toBe(builtAt);

    // A build made from other sources (an older checkout's) is replaced.
    writeFileSync(join(outDir, "manifest.json"), JSON.stringify({ ...manifest, source: "older" }));
    expect(writeIfStale(outDir)).toBe(true);
    expect(readManifest(outDir)!.source).toBe(widgetSourceHash());

    // So is a build missing one of its files.
    rmSync(v1);
    expect(writeIfStale(outDir)).toBe(true);
    expect(existsSync(v1)).toBe(true);
    expect(writeIfStale(outDir)).toBe(false);
  }, 60_000);
});
