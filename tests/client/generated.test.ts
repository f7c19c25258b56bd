import { expect, test } from "bun:test";

/**
 * src/client/openapi.ts is generated from the document the service serves, and src/client/dist/ (the
 * package's export: the built module and its declarations) from the client's sources: a route, a
 * schema or a client file changed without `npm run generate:client` leaves the client typed against
 * an API that no longer exists, or ships a module that is not its sources.
 */
test("the checked-in client types and built module are those of the current document and sources", () => {
  const run = Bun.spawnSync([process.execPath, "src/client/generate.ts", "--check"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  expect(run.stderr.toString()).toBe("");
  expect(run.exitCode).toBe(0);
});
