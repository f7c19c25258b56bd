import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The client runs on Node, Bun, Deno and in browsers: it may use Web standards only (fetch, Web
 * Crypto, URL, TextEncoder, atob, setTimeout), never a runtime's own API or a Node global, and it
 * imports nothing outside src/client/.
 *
 * generate.ts is the one exception: a build tool run by `npm run generate:client` on Bun, which
 * imports the application to build the document. No client file may import it.
 */

const DIR = join(import.meta.dir, "..", "..", "src", "client");
const BUILD_TOOL = "generate.ts";
const clientFiles = readdirSync(DIR).filter((f) => f.endsWith(".ts") && f !== BUILD_TOOL);

/** What a portable file may not contain, with why. */
const FORBIDDEN: [RegExp, string][] = [
  [/from\s+["'](node:|bun\b|bun:)/, "a Node or Bun module"],
  [/import\s*\(\s*["'](node:|bun)/, "a Node or Bun module, imported dynamically"],
  [/\bBun\./, "Bun's API"],
  [/\bDeno\./, "Deno's API"],
  [/\bBuffer\b/, "Node's Buffer (use Uint8Array, TextEncoder, atob)"],
  [/\bprocess\b/, "Node's process"],
  [/\brequire\s*\(/, "CommonJS"],
  [/\b__dirname\b|\b__filename\b/, "CommonJS"],
];

/** Comments may name what the code avoids. */
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");

test("the client's files use Web standards only", () => {
  expect(clientFiles).toContain("index.ts");
  const problems: string[] = [];
  for (const file of clientFiles) {
    const text = code(readFileSync(join(DIR, file), "utf8"));
    for (const [pattern, what] of FORBIDDEN) if (pattern.test(text)) problems.push(`${file}: ${what}`);
  }
  expect(problems).toEqual([]);
});

test("the client imports only its own files, and never the generator", () => {
  const problems: string[] = [];
  for (const file of clientFiles) {
    const text = code(readFileSync(join(DIR, file), "utf8"));
    for (const [, spec] of text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)) {
      if (!/^\.\/[A-Za-z]+\.ts$/.test(spec!) || spec === `./${BUILD_TOOL}`)
        problems.push(`${file} imports ${spec}`);
    }
  }
  expect(problems).toEqual([]);
});

test("the checks catch what they look for", () => {
  const bad = code('import { x } from "node:crypto";\nconst b = Buffer.from("a"); // Bun.serve');
  expect(FORBIDDEN.filter(([p]) => p.test(bad)).map(([, what]) => what)).toEqual([
    "a Node or Bun module",
    "Node's Buffer (use Uint8Array, TextEncoder, atob)",
  ]);
});
