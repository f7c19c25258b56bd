import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

/**
 * The map of src/ (src/README.md) is what the code does: its table lists every folder and file at
 * the top of src/, in an order where imports only go down (a row imports itself and the rows below),
 * except to the files a row names in its "may import" cell; a row that may import "types only"
 * imports nothing else, and one that may import "nothing" imports no other row.
 */

interface Row {
  units: string[];
  /** Files above it that it may still import (paths within src/, named in its cell). */
  allowedFiles: string[];
  typesOnly: boolean;
  nothing: boolean;
}

/** The table's rows, top to bottom; each unit is a top-level file or folder of src/. */
function mapRows(markdown: string): Row[] {
  const lines = markdown.split("\n").filter((l) => l.startsWith("|"));
  return lines.slice(2).map((line) => {
    const [names = "", , mayImport = ""] = line.split("|").slice(1, -1);
    const ticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    return {
      units: ticked(names).map((n) => n.split("/")[0]!),
      allowedFiles: ticked(mayImport).filter((n) => n.includes("/") && n.endsWith(".ts")),
      typesOnly: /types only/.test(mayImport),
      nothing: /^\s*nothing\b/.test(mayImport),
    };
  });
}

interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

const IMPORT = /^\s*(?:import|export)\s+(type\s+)?([\s\S]*?)\s+from\s+["']([^"']+)["']/gm;

/** The relative imports of every source file of src/ that land elsewhere in src/. */
function sourceImports(dir = "src"): Import[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceImports(path);
    if (!/\.tsx?$/.test(e.name)) return [];
    return importsOf(path, readFileSync(path, "utf8"));
  });
}

function importsOf(path: string, text: string): Import[] {
  return [...text.matchAll(IMPORT)].flatMap((m) => {
    const [, typeKeyword, names = "", spec = ""] = m;
    if (!spec.startsWith(".")) return [];
    const to = relative("src", normalize(join(dirname(path), spec)));
    if (to.startsWith("..")) return [];
    const specifiers = names.trim().startsWith("{")
      ? names
          .replace(/[{}]/g, "")
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean)
      : [names.trim()];
    const typeOnly = Boolean(typeKeyword) || specifiers.every((s) => s.startsWith("type "));
    return [{ from: relative("src", path), to, typeOnly }];
  });
}

/** The imports that break the map's rules, each said in a line. */
function breaches(rows: Row[], imports: Import[]): string[] {
  const rowOf = new Map(rows.flatMap((r, i) => r.units.map((u) => [u, i] as const)));
  const unitOf = (path: string) => path.split("/")[0]!;
  return imports.flatMap(({ from, to, typeOnly }) => {
    const [a, b] = [unitOf(from), unitOf(to)];
    if (a === b) return [];
    const [ra, rb] = [rowOf.get(a), rowOf.get(b)];
    if (ra === undefined || rb === undefined) return [`${from} → ${to}: not on the map`];
    const row = rows[ra]!;
    if (row.nothing) return [`${from} → ${to}: ${a} may import nothing of the application`];
    if (row.typesOnly && !typeOnly) return [`${from} → ${to}: ${a} may import types only`];
    if (rb < ra && !row.allowedFiles.includes(to)) return [`${from} → ${to}: ${b} is above ${a}`];
    return [];
  });
}

const README = readFileSync("src/README.md", "utf8");

test("every folder and file at the top of src/ is on the map", () => {
  const onMap = new Set(mapRows(README).flatMap((r) => r.units));
  const missing = readdirSync("src").filter((name) => name !== "README.md" && !onMap.has(name));
  expect(missing).toEqual([]);
});

test("imports between the map's rows only go down", () => {
  const imports = sourceImports();
  expect(imports.length).toBeGreaterThan(500);
  expect(breaches(mapRows(README), imports)).toEqual([]);
});

test("the check finds an import up, a value where types only, anything from a row of nothing", () => {
  const rows = mapRows(`| layer | holds | may import |
|---|---|---|
| \`routes/<resource>/\` | | services |
| \`deps.ts\` | | lower layers, types only |
| \`timers/\` | | db |
| \`db/\` | | \`timers/kinds.ts\` |
| \`runtime/\` | | nothing of the application |
| \`errors.ts\` | | one another only |
`);
  expect(rows.map((r) => r.units)).toEqual([
    ["routes"],
    ["deps.ts"],
    ["timers"],
    ["db"],
    ["runtime"],
    ["errors.ts"],
  ]);
  const found = breaches(rows, [
    ...importsOf(
      "src/db/calls.ts",
      'import { x } from "../timers/kinds.ts";\nimport { y } from "../errors.ts";',
    ),
    ...importsOf("src/db/timers.ts", 'import { runner } from "../timers/runner.ts";'),
    ...importsOf(
      "src/deps.ts",
      'import type { A } from "./db/a.ts";\nimport { type B, c } from "./timers/b.ts";',
    ),
    ...importsOf("src/deps.ts", 'import { type D } from "./db/d.ts";'),
    ...importsOf("src/runtime/bun.ts", 'import { ApiError } from "../errors.ts";'),
    ...importsOf("src/timers/x.ts", 'import { createApp } from "../app.ts";'),
  ]);
  expect(found).toEqual([
    "db/timers.ts → timers/runner.ts: timers is above db",
    "deps.ts → timers/b.ts: deps.ts may import types only",
    "runtime/bun.ts → errors.ts: runtime may import nothing of the application",
    "timers/x.ts → app.ts: not on the map",
  ]);
});
