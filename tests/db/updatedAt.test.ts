import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A call's and a campaign's `updatedAt` orders their events for webhook receivers, so every statement
 * that writes a call or a campaign sets `updated_at` (db/engine/updatedAt.ts; no trigger: the
 * service's clock decides). A statement added without it would leave the object's events unordered
 * without any behaviour test noticing: this reads every statement of src/db instead. The one
 * exception is a statement that writes only the engine's bookkeeping, which is not part of the object.
 */

const DB = join(import.meta.dir, "..", "..", "src", "db");
const TABLES = ["calls", "campaigns"];
/** Columns that are not part of the API object: writing only these is not a change of the object. */
const BOOKKEEPING: Record<string, string[]> = {
  campaigns: ["wake_at"],
  // An end reported while the phone still rang, kept for the answer to apply: the call stays `ringing`
  // (no event) until then, and the answer that applies it sets updated_at.
  calls: ["hung_up_while_ringing_at"],
};

/**
 * Each template literal of a source file, whole: with the text of the fragments nested in its `${…}`
 * (a statement is often built of parts). Comments and string literals are skipped, so the backticks
 * of a doc comment are not taken for a template.
 */
function templates(source: string): string[] {
  const out: string[] = [];
  let i = 0;
  const skipQuoted = (quote: string) => {
    for (i++; i < source.length && source[i] !== quote; i++) if (source[i] === "\\") i++;
    i++;
  };
  const readTemplate = (): string => {
    const start = ++i;
    while (i < source.length) {
      if (source[i] === "\\") i += 2;
      else if (source[i] === "`") return source.slice(start, i++);
      else if (source.startsWith("${", i)) {
        i += 2;
        readCode(true);
      } else i++;
    }
    return source.slice(start);
  };
  /** Code up to the `}` closing a `${` (inside a template) or to the end of the file. */
  const readCode = (inTemplate: boolean) => {
    let depth = 0;
    while (i < source.length) {
      if (source.startsWith("//", i))
        i = source.indexOf("\n", i) === -1 ? source.length : source.indexOf("\n", i);
      else if (source.startsWith("/*", i)) i = source.indexOf("*/", i) + 2;
      else if (source[i] === '"' || source[i] === "'") skipQuoted(source[i]!);
      else if (source[i] === "`") {
        const text = readTemplate();
        if (!inTemplate) out.push(text);
      } else if (source[i] === "{") {
        depth++;
        i++;
      } else if (source[i] === "}") {
        i++;
        if (inTemplate && depth === 0) return;
        depth--;
      } else i++;
    }
  };
  readCode(false);
  return out;
}

/** What is wrong with one statement: a write of a call or a campaign that does not set updated_at. */
function problemOf(statement: string): string | null {
  for (const table of TABLES) {
    const write = new RegExp(
      `\\b(update ${table}\\b(?:\\s+\\w+)?\\s+set\\b|insert into ${table}\\b)`,
      "i",
    ).exec(statement);
    if (!write || /\bupdated_at\b/.test(statement)) continue;
    const set = /\bset\b([\s\S]*?)(?:\bwhere\b|\bfrom\b|\breturning\b|$)/i.exec(statement.slice(write.index));
    const columns = [...(set?.[1] ?? "").matchAll(/(\w+)\s*=/g)].map((m) => m[1]!);
    const bookkeeping = BOOKKEEPING[table] ?? [];
    if (
      write[1]!.startsWith("update") &&
      columns.length > 0 &&
      columns.every((c) => bookkeeping.includes(c))
    ) {
      continue;
    }
    return `${write[1]} without updated_at: ${statement.trim().split("\n")[0]}`;
  }
  return null;
}

test("every statement that writes a call or a campaign sets updated_at", () => {
  const problems: string[] = [];
  let writes = 0;
  for (const file of readdirSync(DB).filter((f) => f.endsWith(".ts"))) {
    for (const statement of templates(readFileSync(join(DB, file), "utf8"))) {
      if (TABLES.some((t) => new RegExp(`update ${t}\\b|insert into ${t}\\b`, "i").test(statement))) writes++;
      const problem = problemOf(statement);
      if (problem) problems.push(`${file}: ${problem}`);
    }
  }
  expect(problems).toEqual([]);
  // The scan sees the statements it is about (inserts, the simulated steps, the live moves, campaigns).
  expect(writes).toBeGreaterThanOrEqual(12);
});

test("the check finds a write without updated_at, and lets bookkeeping alone pass", () => {
  expect(problemOf("update calls set status = 'ringing' where id = $1")).toContain("update calls set");
  expect(problemOf("update calls c set status = 'ringing' from x where c.id = x.id")).toContain(
    "update calls",
  );
  expect(problemOf("insert into campaigns (id, name) values ($1, $2)")).toContain("insert into campaigns");
  expect(problemOf("update calls set status = 'ringing', updated_at = $2 where id = $1")).toBeNull();
  expect(problemOf("update campaigns set wake_at = $2 where id = $1")).toBeNull();
  expect(problemOf("update campaigns set wake_at = $2, status = 'running' where id = $1")).toContain(
    "update campaigns set",
  );
  expect(problemOf("update campaign_contacts set status = 'failed'")).toBeNull();
  // A statement built of parts is read whole; a doc comment's backticks are not a template.
  // A source file's text, its placeholders written #{…} here.
  const source = [
    "/** Moves `initiated` to `ringing`. */",
    "const a = sql`update calls set status = #{to}, #{sql`placed_at = #{at}`} where id = #{id}`;",
    "const b = sql`update calls set #{sql`updated_at = #{now}`} where id = #{id}`;",
  ]
    .join("\n")
    .replaceAll("#{", "$" + "{");
  expect(templates(source).map(problemOf)).toEqual([expect.stringContaining("update calls set"), null]);
});
