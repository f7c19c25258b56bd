import { afterAll, describe, expect, test } from "bun:test";
import { bodyLimit } from "../../src/http/body.ts";
import { createTestContext, seedOrganization } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
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
 * Bad input on every operation of the document that takes a JSON body: it is refused with the right
 * code, never a 500, never a stack trace. A new route is covered as soon as it is registered.
 */

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());
addFixtureWriteRoute(ctx.app, ctx.deps);
// Two handlers with a bug: one throws an Error (carrying a secret in its message), one a bare value.
const BOOM_SECRET = `inf_live_${"S".repeat(43)}`;
ctx.app.get("/api/v1/test-fixtures/boom", () => {
  throw new Error(`kaboom while handling ${BOOM_SECRET}`);
});
ctx.app.get("/api/v1/test-fixtures/boom-value", () => {
  throw "a thrown string";
});
const seed = await seedOrganization(ctx);
const withBody = operations(await fetchDocument(ctx)).filter((o) => jsonBodyOf(o.op));

/** A fresh client address per request, so the per-address limit of public routes never answers first. */
let addresses = 0;
function nextAddress(): string {
  addresses += 1;
  return `10.${(addresses >> 16) & 255}.${(addresses >> 8) & 255}.${addresses & 255}`;
}

/**
 * A credential that gets past the route's own check: the wildcard live key for `secretKey` routes,
 * the admin token for other bearer-protected ones. Routes with a credential the test cannot forge
 * (a signature) may refuse it before reading the body's shape; see `shapeRefusal`.
 */
function credential(o: DocumentedOperation): string | undefined {
  if (secretKeyScopes(o.op)) return `Bearer ${seed.liveKey}`;
  if (o.op.security?.length) return `Bearer ${FULL_ENV.ADMIN_TOKEN}`;
  return undefined;
}

async function send(
  o: DocumentedOperation,
  body: BodyInit | null,
  headers: Record<string, string>,
): Promise<Response> {
  const auth = credential(o);
  const res = await ctx.app.fetch(
    new Request(`http://localhost${concretePath(o.path, o.op)}`, {
      method: o.method.toUpperCase(),
      headers: { ...(auth ? { authorization: auth } : {}), ...headers },
      body,
      // @ts-expect-error: needed by the fetch standard for a stream body; not in the DOM types.
      duplex: "half",
    }),
    { remoteAddress: nextAddress() },
  );
  expect(res.status).not.toBe(500);
  return res;
}

/** A JSON object of exactly `size` bytes. */
function jsonOfSize(size: number): string {
  const shell = '{"padding":""}';
  return `{"padding":"${"a".repeat(size - shell.length)}"}`;
}

/** A body that arrives in 16 KiB chunks without Content-Length; counts what was pulled from it. */
function streamed(total: number) {
  const chunk = new TextEncoder().encode("a".repeat(16 * 1024));
  const counter = { pulled: 0 };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (counter.pulled >= total) return controller.close();
      counter.pulled += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
  return { stream, counter };
}

test("the document has operations with a JSON body", () => {
  expect(withBody.length).toBeGreaterThan(0);
});

describe.each(withBody.map((o) => [o.label, o] as const))("%s", (_label, o) => {
  const limit = bodyLimit(concretePath(o.path, o.op));
  const json = { "content-type": "application/json" };

  test.each([
    ["truncated JSON", '{"agentId":'],
    ["single quotes", "{'agentId': 'x'}"],
    ["a trailing comma", '{"agentId": "x",}'],
    ["an empty body", ""],
  ])("malformed JSON (%s) is 400 invalid_request", async (_name, body) => {
    await expectApiError(await send(o, body, json), 400, "invalid_request");
  });

  test("a NUL character (\\u0000) in any string or key is 400 invalid_request naming where", async () => {
    for (const [body, param] of [
      ['{"padding":{"deep":["x\\u0000y"]}}', "padding.deep.0"],
      ['{"pad\\u0000ding":1}', "pad\u0000ding"],
    ] as const) {
      await expectApiError(await send(o, body, json), 400, "invalid_request", { param });
    }
  });

  test("a lone surrogate (\\ud800 without its pair) in any string or key is 400 invalid_request naming where", async () => {
    for (const [body, param] of [
      ['{"padding":{"deep":["x\\ud800y"]}}', "padding.deep.0"],
      ['{"padding":{"k":"\\udc00"}}', "padding.k"],
      ['{"padding":{"\\ud83d":1}}', "padding.\ud83d"],
      ['{"padding":"\\ude00\\ud83d"}', "padding"],
    ] as const) {
      const { error } = await expectApiError(await send(o, body, json), 400, "invalid_request", { param });
      expect(error.message).toContain("lone surrogate");
    }
    // A pair is a character (U+1F600): not refused for it.
    const pair = await send(o, '{"padding":"\\ud83d\\ude00"}', json);
    expect(await pair.clone().text()).not.toContain("surrogate");
  });

  test("a body nested as deep as the size limit allows (a NUL at the bottom) is 400 naming where, nothing logged", async () => {
    // 100,000 levels where the limit allows it (1 MiB), as many as fit in 64 KiB elsewhere.
    const levels = Math.min(100_000, Math.floor((limit - 64) / 2));
    const body = `{"padding":${"[".repeat(levels)}"\\u0000"${"]".repeat(levels)}}`;
    const logged = ctx.logs.length;
    const res = await send(o, body, json);
    // The first array too deep is the 64th inside `padding` (the body itself is level 1).
    const { error } = await expectApiError(res, 400, "invalid_request", {
      param: `padding${".0".repeat(63)}`,
    });
    expect(error.message).toContain("64 levels");
    expect(ctx.logs.slice(logged).filter((l) => JSON.parse(l).level === "error")).toEqual([]);
  });

  test("65 levels of objects, without a NUL, are 400 naming the first one too deep", async () => {
    const body = `{"padding":${'{"a":'.repeat(64)}1${"}".repeat(64)}}`;
    const res = await send(o, body, json);
    await expectApiError(res, 400, "invalid_request", { param: `padding${".a".repeat(63)}` });
  });

  test("64 levels of nesting are not refused for their depth", async () => {
    const body = `{"padding":${"[".repeat(63)}"x"${"]".repeat(63)}}`;
    const res = await send(o, body, json);
    expect(await res.clone().text()).not.toContain("64 levels");
  });

  test("bytes that are not UTF-8 are 400 invalid_request", async () => {
    const bytes = new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]);
    await expectApiError(await send(o, bytes, json), 400, "invalid_request");
  });

  test.each([
    ["text/plain", { "content-type": "text/plain" }],
    ["form encoding", { "content-type": "application/x-www-form-urlencoded" }],
    ["multipart", { "content-type": "multipart/form-data; boundary=x" }],
    ["no content type", {}],
  ])("a JSON body sent as %s is 415 unsupported_media_type", async (_name, headers) => {
    const res = await send(o, new TextEncoder().encode('{"agentId":"x"}'), headers);
    await expectApiError(res, 415, "unsupported_media_type");
  });

  test(`a body over ${limit} bytes with Content-Length is 413 payload_too_large`, async () => {
    const body = jsonOfSize(limit + 1);
    const res = await send(o, body, { ...json, "content-length": String(body.length) });
    await expectApiError(res, 413, "payload_too_large");
  });

  test(`a streamed body over ${limit} bytes without Content-Length is 413, cut off at the limit`, async () => {
    const { stream, counter } = streamed(limit * 16);
    await expectApiError(await send(o, stream, json), 413, "payload_too_large");
    expect(counter.pulled).toBeLessThan(limit + 64 * 1024);
  });

  test(`a body of exactly ${limit} bytes is not refused for its size`, async () => {
    const res = await send(o, jsonOfSize(limit), json);
    expect(res.status).not.toBe(413);
  });

  test.each([
    ["an array", "[]"],
    ["an array of objects", '[{"agentId":"x"}]'],
    ["null", "null"],
    ["a string", '"inf_wcs_x"'],
    ["a number", "42"],
    ["a boolean", "true"],
  ])("%s at the top level is 400 invalid_request", async (_name, body) => {
    const res = await send(o, body, json);
    // A route whose credential this test cannot forge may refuse it first; every other route reads the shape.
    if (res.status === 401 && !secretKeyScopes(o.op) && o.op.security?.length) return;
    await expectApiError(res, 400, "invalid_request");
  });
});

describe("routes and failures outside the document", () => {
  test.each([
    ["GET", "/api/v1/nope"],
    ["POST", "/api/v1/nope"],
    ["GET", "/api/v2/agents"],
    ["GET", "/nope"],
  ])("%s %s is a JSON 404 not_found", async (method, path) => {
    const res = await ctx.request(path, { method, ...(method === "POST" ? { json: {} } : {}) });
    await expectApiError(res, 404, "not_found");
  });

  test("a method the path does not serve is a JSON error, not a 500", async () => {
    const res = await ctx.request("/api/v1/agents", { method: "DELETE", key: seed.liveKey });
    await expectApiError(res, 405, "method_not_allowed");
    expect(res.headers.get("allow")).toBe("GET, HEAD");
  });
});

describe("a bug in a handler", () => {
  test("is 500 internal_error without a stack trace, and is logged with the request id", async () => {
    for (const path of ["/api/v1/test-fixtures/boom", "/api/v1/test-fixtures/boom-value"]) {
      const res = await ctx.request(path);
      await expectApiError(res, 500, "internal_error");
      const text = await res.text();
      expect(text).not.toContain("kaboom");
      expect(text).not.toContain("thrown string");
      expect(text).not.toContain(BOOM_SECRET);
      const requestId = res.headers.get("x-request-id");
      const logged = ctx.logs
        .map((l) => JSON.parse(l))
        .find((l) => l.level === "error" && l.requestId === requestId);
      expect(logged).toBeDefined();
      expect(logged.stack ?? logged.error).toMatch(/kaboom|thrown string/);
    }
    // The log keeps the story but not the secret that happened to be in the message.
    expect(ctx.logs.join("\n")).not.toContain(BOOM_SECRET);
  });
});
