import { afterAll, describe, expect, test } from "bun:test";
import { createRoute, z } from "@hono/zod-openapi";
import { SCOPES } from "../../src/auth/scopes.ts";
import { bodyLimit } from "../../src/http/body.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization } from "../helpers/app.ts";
import { outcomeOf } from "../helpers/errors.ts";
import {
  addFixtureWriteRoute,
  concretePath,
  type DocumentedOperation,
  FULL_ENV,
  fetchDocument,
  jsonBodyOf,
  operations,
  secretKeyScopes,
} from "../helpers/openapi.ts";

/**
 * A body is read only once the request's credential is accepted: on every operation of the document
 * that takes a JSON body and a secret key or the admin token, a request without a good credential is
 * answered without a byte of its body being pulled, whatever it declares or sends. A new route is
 * covered as soon as it is registered.
 */

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());
addFixtureWriteRoute(ctx.app, ctx.deps);
// A route that reads its body without asking for it first (no credential, no `readBody`).
ctx.app.openapi(
  createRoute({
    method: "post",
    path: "/api/v1/test-fixtures/unguarded",
    request: { body: { content: { "application/json": { schema: z.object({ padding: z.string() }) } } } },
    responses: { 200: { description: "Read." } },
  }),
  (c) => c.json({ length: c.req.valid("json").padding.length }, 200),
);
const seed = await seedOrganization(ctx);
const c = ctx.deps;

/** Operations with a JSON body behind a bearer credential the test can present (not a signature). */
const guarded = operations(await fetchDocument(ctx)).filter(
  (o) => jsonBodyOf(o.op) && o.op.security?.some((s) => "secretKey" in s || "adminToken" in s),
);

/**
 * A body that does not end (it fails once far past every limit, so that a reader without a bound
 * fails the test instead of filling the memory); counts the chunks pulled from it. Nothing is pulled
 * until someone reads.
 */
function endless() {
  const chunk = new TextEncoder().encode(`{"padding":"${"a".repeat(16 * 1024 - 12)}`);
  const counter = { pulled: 0 };
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        counter.pulled += 1;
        if (counter.pulled * chunk.byteLength > 8 * 1024 * 1024) controller.error(new Error("no end"));
        else controller.enqueue(chunk);
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, counter };
}

function send(o: DocumentedOperation, body: BodyInit, headers: Record<string, string>) {
  return ctx.app.fetch(
    new Request(`http://localhost${concretePath(o.path, o.op)}`, {
      method: o.method.toUpperCase(),
      headers: { "content-type": "application/json", ...headers },
      body,
      // @ts-expect-error: needed by the fetch standard for a stream body; not in the DOM types.
      duplex: "half",
    }),
    { remoteAddress: "127.0.0.1" },
  );
}

async function expectCode(res: Response, expected: string) {
  expect(await outcomeOf(res)).toBe(expected);
}

test("the document has write operations behind a secret key and behind the admin token", () => {
  expect(guarded.some((o) => secretKeyScopes(o.op))).toBe(true);
  expect(guarded.some((o) => !secretKeyScopes(o.op))).toBe(true);
});

describe.each(guarded.map((o) => [o.label, o] as const))("%s", (_label, o) => {
  const scope = secretKeyScopes(o.op)?.[0];
  const good = scope ? seed.liveKey : FULL_ENV.ADMIN_TOKEN!;

  test.each([
    ["no credential", {}],
    ["a wrong credential", { authorization: `Bearer inf_live_${"A".repeat(43)}` }],
    [
      "another scheme's credential",
      { authorization: `Bearer ${scope ? FULL_ENV.ADMIN_TOKEN : seed.liveKey}` },
    ],
  ])("%s with an endless body: 401, not a byte read", async (_name, headers) => {
    const { stream, counter } = endless();
    await expectCode(await send(o, stream, headers), "401 invalid_key");
    expect(counter.pulled).toBe(0);
  });

  test("no credential and a huge declared length: 401, not 413", async () => {
    const { stream, counter } = endless();
    const res = await send(o, stream, { "content-length": String(1024 ** 3) });
    await expectCode(res, "401 invalid_key");
    expect(counter.pulled).toBe(0);
  });

  test("no credential and a body that is neither JSON nor declared as such: 401, not 415 or 400", async () => {
    await expectCode(await send(o, "{oops", { "content-type": "text/plain" }), "401 invalid_key");
    await expectCode(await send(o, "{oops", {}), "401 invalid_key");
  });

  if (scope) {
    test("a key without the scope: 403, not a byte read", async () => {
      const k = await createSecretKey(c, seed.org.id, {
        mode: "live",
        scopes: SCOPES.filter((s) => s !== scope),
      });
      const { stream, counter } = endless();
      await expectCode(await send(o, stream, { authorization: `Bearer ${k.key}` }), "403 missing_scope");
      expect(counter.pulled).toBe(0);
    });
  }

  test("with a good credential the body is read, and cut off at the limit (413)", async () => {
    const { stream, counter } = endless();
    await expectCode(await send(o, stream, { authorization: `Bearer ${good}` }), "413 payload_too_large");
    expect(counter.pulled).toBeGreaterThan(0);
    expect(counter.pulled * 16 * 1024).toBeLessThan(bodyLimit(concretePath(o.path, o.op)) + 64 * 1024);
  });
});

test("a route that reads its body without asking first still reads through the bounded reader", async () => {
  const { stream, counter } = endless();
  const res = await ctx.app.fetch(
    new Request("http://localhost/api/v1/test-fixtures/unguarded", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: stream,
      // @ts-expect-error: needed by the fetch standard for a stream body; not in the DOM types.
      duplex: "half",
    }),
    { remoteAddress: "127.0.0.1" },
  );
  expect(res.status).toBe(400);
  expect(counter.pulled * 16 * 1024).toBeLessThan(bodyLimit("/api/v1/test-fixtures/unguarded") + 64 * 1024);
  const ok = await ctx.request("/api/v1/test-fixtures/unguarded", {
    method: "POST",
    json: { padding: "abc" },
  });
  expect(await ok.json()).toEqual({ length: 3 });
});
