import { expect, test } from "bun:test";
import { Buffer } from "node:buffer";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The repository speaks of itself only: no file points to a document it does not hold (the
 * service's requirements and style notes live outside it). A comment names the behaviour instead.
 */

/** Assembled here so that this file does not name them itself. */
const OUTSIDE_DOCUMENTS = ["SPEC", "CONTRACT", "GUIDE"].map((name) => `${name}.md`);

const SCANNED = ["src", "sql", "tests", "widget/src", "README.md"];

function files(path: string): string[] {
  try {
    return readdirSync(path, { withFileTypes: true }).flatMap((e) =>
      e.name === "node_modules" ? [] : files(join(path, e.name)),
    );
  } catch (err) {
    if ((err as { code?: string }).code === "ENOTDIR") return [path];
    throw err;
  }
}

/** The outside documents a file's bytes name. */
function pointersIn(bytes: Buffer): string[] {
  return OUTSIDE_DOCUMENTS.filter((name) => bytes.includes(name));
}

test("no file points to a document outside the repository", () => {
  const scanned = SCANNED.flatMap(files);
  expect(scanned).toContain("README.md");
  expect(scanned).toContain("sql/0001_init.sql");
  const pointers = scanned.flatMap((file) => {
    return pointersIn(readFileSync(file)).map((name) => `${file}: ${name}`);
  });
  expect(pointers).toEqual([]);
});

test("the scan finds a pointer where there is one", () => {
  expect(pointersIn(Buffer.from(`// see ${OUTSIDE_DOCUMENTS[1]} for the envelope`))).toEqual([
    OUTSIDE_DOCUMENTS[1]!,
  ]);
  expect(pointersIn(Buffer.from("// the error envelope: { error: { code, message } }"))).toEqual([]);
});
