import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** The README tells a webhook receiver what the API document tells it: deliveries repeat and are unordered. */

const README = readFileSync(join(import.meta.dir, "..", "..", "README.md"), "utf8");

test("the README's Webhooks section says deliveries are at least once and unordered, and how to cope", () => {
  const start = README.indexOf("\n### Webhooks\n");
  expect(start).toBeGreaterThan(README.indexOf("\n## Use it from TypeScript\n"));
  const section = README.slice(start, README.indexOf("\n## ", start)).replace(/\s+/g, " ");
  for (const said of ["at least once and unordered", "`webhook-id`", "`data.updatedAt`", "`createdAt`"]) {
    expect(section).toContain(said);
  }
});
