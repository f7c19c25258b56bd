/**
 * The application runs on Bun and Deno from the same sources: what the process loads from its entries
 * reaches a runtime only through src/runtime/ (its adapters, picked by current.ts), and Deno's own
 * type-check accepts the application. The lint rule against Bun, Deno and Node globals outside
 * src/runtime/ is in biome.json (noRestrictedGlobals).
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { moduleGraph, runtimeViolations } from "./moduleGraph.ts";

const root = join(import.meta.dir, "..", "..");
const src = join(root, "src");
const fixtures = join(import.meta.dir, "fixtures");
const deno = join(root, "node_modules", ".bin", "deno");

describe("the runtime boundary", () => {
  test("the application (createApp and all it imports) imports no runtime adapter or runtime module", () => {
    expect(runtimeViolations({ entry: join(src, "app.ts"), runtimeDir: join(src, "runtime"), root })).toEqual(
      [],
    );
  });

  test("the process reaches the adapters only through runtime/current.ts", () => {
    const violations = runtimeViolations({
      entry: join(src, "main.ts"),
      runtimeDir: join(src, "runtime"),
      gateway: join(src, "runtime", "current.ts"),
      root,
    });
    expect(violations).toEqual([]);
  });

  test("the server loads none of the build tools (they run on Bun: its bundler and compiler)", () => {
    // Exempt from the lint rule against runtime globals in biome.json, so kept out of the process here.
    const buildTools = [
      join(src, "build.ts"),
      join(src, "widget", "build.ts"),
      join(src, "widget", "write.ts"),
    ];
    const { modules } = moduleGraph(join(src, "main.ts"));
    expect(buildTools.filter((f) => modules.has(f))).toEqual([]);
    expect(modules.has(join(src, "widget", "assets.ts"))).toBe(true);
  });

  test("the check finds an adapter, a runtime module and a runtime's import attribute", () => {
    const base = {
      runtimeDir: join(fixtures, "runtime"),
      gateway: join(fixtures, "runtime", "current.ts"),
      root,
    };
    expect(runtimeViolations({ ...base, entry: join(fixtures, "portable.ts") })).toEqual([]);
    expect(runtimeViolations({ ...base, entry: join(fixtures, "tied.ts") }).sort()).toEqual(
      [
        "tests/runtime/fixtures/tiedHelper.ts imports tests/runtime/fixtures/runtime/bun.ts, a runtime adapter",
        "tests/runtime/fixtures/tiedHelper.ts imports bun, a runtime's own module",
        'tests/runtime/fixtures/tiedHelper.ts imports with { type: "file" }, which only one runtime reads',
      ].sort(),
    );
  });

  test("deno check accepts the application entry and the Deno adapter", () => {
    const run = Bun.spawnSync([deno, "check", "src/app.ts", "src/runtime/deno.ts"], {
      cwd: root,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const output = `${run.stdout.toString()}${run.stderr.toString()}`;
    expect(output).not.toContain("error");
    expect(run.exitCode).toBe(0);
  });

  test("deno check refuses a module that uses Bun's API", () => {
    const run = Bun.spawnSync([deno, "check", "tests/runtime/fixtures/runtime/bun.ts"], {
      cwd: root,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(run.exitCode).not.toBe(0);
    expect(run.stderr.toString()).toContain("Cannot find name 'Bun'");
  });
});
