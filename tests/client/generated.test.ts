import { expect, test } from "bun:test";

/**
 * src/client/openapi.ts is generated from the document the service serves; a route or schema changed
 * without `npm run generate:client` leaves the client typed against an API that no longer exists.
 */
test("the checked-in client types are those of the current document", () => {
  const run = Bun.spawnSync([process.execPath, "src/client/generate.ts", "--check"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  expect(run.stderr.toString()).toBe("");
  expect(run.exitCode).toBe(0);
});
