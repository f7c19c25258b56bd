import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** Source files stay under 500 lines (split by what they do when one grows). */

/** Generated, never edited by hand: the client's types, and the client built for its package export. */
const GENERATED = new Set(["src/client/openapi.ts"]);
const GENERATED_DIRS = new Set(["src/client/dist"]);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return GENERATED_DIRS.has(path) ? [] : sources(path);
    return /\.(ts|tsx|js|sql)$/.test(e.name) && !GENERATED.has(path) ? [path] : [];
  });
}

test("every source file has fewer than 500 lines", () => {
  const files = sources("src");
  expect(files).toContain("src/admin/schema/organizations.ts");
  const long = files
    .map((f) => ({ f, lines: readFileSync(f, "utf8").split("\n").length - 1 }))
    .filter(({ lines }) => lines >= 500)
    .map(({ f, lines }) => `${f}: ${lines} lines`);
  expect(long).toEqual([]);
});
