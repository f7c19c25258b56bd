import { afterAll, describe, expect, test } from "bun:test";
import { SCOPES, type Scope } from "../../src/auth/scopes.ts";
import { type ErrorCode, errorStatus } from "../../src/errors.ts";
import { createSecretKey, revokeSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import {
  addFixtureWriteRoute,
  concretePath,
  documentedCodes,
  FULL_ENV,
  fetchDocument,
  jsonBodyOf,
  operations,
  secretKeyScopes,
} from "../helpers/openapi.ts";

/**
 * The shared security tests: every operation whose document names the `secretKey` scheme is called
 * with each kind of bad credential, and with keys that lack or hold exactly the scope it declares.
 * A new route is covered as soon as it is registered with `security: [{ secretKey: ["<scope>"] }]`.
 */

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());
addFixtureWriteRoute(ctx.app, ctx.deps);
const seed = await seedOrganization(ctx);
const c = ctx.deps;
const revokedLive = await createSecretKey(c, seed.org.id, { mode: "live", scopes: ["*"] });
await revokeSecretKey(c, revokedLive.id);
const revokedTest = await createSecretKey(c, seed.org.id, { mode: "test", scopes: ["*"] });
await revokeSecretKey(c, revokedTest.id);

const secured = operations(await fetchDocument(ctx)).filter((o) => secretKeyScopes(o.op) !== null);

/** Every way of presenting a wrong secret key; each must be 401 `invalid_key`. */
const badCredentials: [name: string, authorization: string | null][] = [
  ["no Authorization header", null],
  ["an empty bearer", "Bearer "],
  ["garbage", "Bearer garbage"],
  ["a valid key without the Bearer scheme", seed.liveKey],
  ["a Basic scheme", `Basic ${btoa(`${seed.liveKey}:`)}`],
  ["an unknown well-formed live key", `Bearer inf_live_${"A".repeat(43)}`],
  ["an unknown well-formed test key", `Bearer inf_test_${"b".repeat(43)}`],
  ["a live key with a test prefix", `Bearer ${seed.liveKey.replace("inf_live_", "inf_test_")}`],
  ["a truncated key", `Bearer ${seed.liveKey.slice(0, -1)}`],
  ["a revoked live key", `Bearer ${revokedLive.key}`],
  ["a revoked test key", `Bearer ${revokedTest.key}`],
  ["a publishable key", `Bearer ${seed.publishable.key}`],
  ["a session-token-shaped value", `Bearer inf_wcs_${"C".repeat(43)}`],
  ["the admin token", `Bearer ${FULL_ENV.ADMIN_TOKEN}`],
];

/** A key with the right scope may still be refused with 403, for any reason but its scope. */
const forbiddenButNotMissingScope = (Object.keys(errorStatus) as ErrorCode[]).filter(
  (code) => errorStatus[code] === 403 && code !== "missing_scope",
);

function call(o: (typeof secured)[number], authorization: string | null) {
  const headers: Record<string, string> = {};
  if (authorization !== null) headers.authorization = authorization;
  // A valid (empty) JSON body, so that only the credential can be at fault.
  const body = jsonBodyOf(o.op) ? {} : undefined;
  return ctx.request(concretePath(o.path, o.op), {
    method: o.method.toUpperCase(),
    headers,
    ...(body ? { json: body } : {}),
  });
}

test("the document has operations that take a secret key", () => {
  expect(secured.length).toBeGreaterThan(0);
});

describe.each(secured.map((o) => [o.label, o] as const))("%s", (_label, o) => {
  // tests/http/openapi.test.ts checks that each operation names exactly one known scope.
  const scope = secretKeyScopes(o.op)![0] as Scope;
  const allBut = SCOPES.filter((s) => s !== scope);

  test.each(badCredentials)("%s is 401 invalid_key", async (_name, authorization) => {
    const res = await call(o, authorization);
    await expectApiError(res, 401, "invalid_key");
    const text = await res.text();
    // The answer never repeats what was presented.
    if (authorization) expect(text).not.toContain(authorization.replace(/^\w+ /, "") || "\u0000");
  });

  // A live-only route (it documents the test-mode refusal) answers every test key so, its scopes aside.
  const liveOnly = documentedCodes(o.op.responses?.["403"]).includes("test_mode_not_supported");

  test.each(["live", "test"] as const)(
    `a %s key with every scope but "${scope}" is 403 missing_scope${liveOnly ? " (a test key: test_mode_not_supported)" : ""}`,
    async (mode) => {
      const k = await createSecretKey(c, seed.org.id, { mode, scopes: allBut });
      const res = await call(o, `Bearer ${k.key}`);
      if (mode === "test" && liveOnly) {
        await expectApiError(res, 403, "test_mode_not_supported");
        return;
      }
      await expectApiError(res, 403, "missing_scope");
      expect(await res.text()).toContain(scope);
    },
  );

  test("the scheme name is case-insensitive: `bearer <key>` is the same key", async () => {
    const k = await createSecretKey(c, seed.org.id, { mode: "live", scopes: allBut });
    // Past the key (not 401): refused for its scope, which proves the key was read.
    await expectApiError(await call(o, `bearer ${k.key}`), 403, "missing_scope");
    await expectApiError(await call(o, `BEARER  ${k.key}`), 403, "missing_scope");
  });

  test(`a key holding only "${scope}" gets past the scope check (the document names the enforced scope)`, async () => {
    const k = await createSecretKey(c, seed.org.id, { mode: "live", scopes: [scope] });
    const res = await call(o, `Bearer ${k.key}`);
    expect(res.status).not.toBe(401);
    expect(res.status).not.toBe(500);
    if (res.status === 403) await expectApiError(res, 403, forbiddenButNotMissingScope);
  });
});
