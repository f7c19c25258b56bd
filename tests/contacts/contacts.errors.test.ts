import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/** Every error path of the contact routes. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;
let contactId: string;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
  const res = await ctx.request("/api/v1/contacts", {
    method: "POST",
    key: seed.liveKey,
    json: { phone: "+33612345678" },
  });
  contactId = (await res.json()).id;
});
afterAll(() => ctx.close());

const post = (json: unknown) => ctx.request("/api/v1/contacts", { method: "POST", key: seed.testKey, json });
const patch = (json: unknown) =>
  ctx.request(`/api/v1/contacts/${contactId}`, { method: "PATCH", key: seed.testKey, json });

const long = (n: number) => "x".repeat(n);
const metadataOf = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));

describe("body validation: 400 invalid_request with param", () => {
  const phones: unknown[] = [
    "0612345678",
    "+0612345678",
    "+33 6 12 34 56 78",
    "+33-612345678",
    "33612345678",
    "+1",
    "+123456",
    "+1234567890123456",
    "+3361234567a",
    "",
    33612345678,
    null,
    ["+33612345678"],
  ];
  test("phone missing or not E.164", async () => {
    await expectApiError(await post({}), 400, "invalid_request", { param: "phone" });
    await expectApiError(await post({ name: "x" }), 400, "invalid_request", { param: "phone" });
    for (const phone of phones)
      await expectApiError(await post({ phone }), 400, "invalid_request", { param: "phone" });
    for (const phone of phones)
      await expectApiError(await patch({ phone }), 400, "invalid_request", { param: "phone" });
  });

  test("name, email", async () => {
    for (const name of ["", "   ", long(201), 123, true, {}]) {
      await expectApiError(await post({ phone: "+33612345678", name }), 400, "invalid_request", {
        param: "name",
      });
      await expectApiError(await patch({ name }), 400, "invalid_request", { param: "name" });
    }
    for (const email of ["not-an-email", "a@b", "@example.com", `${long(250)}@example.com`, 5, ""]) {
      await expectApiError(await post({ phone: "+33612345678", email }), 400, "invalid_request", {
        param: "email",
      });
      await expectApiError(await patch({ email }), 400, "invalid_request", { param: "email" });
    }
  });

  test("metadata must be flat: ≤ 50 keys of ≤ 64 characters, values string ≤ 1000 / number / boolean / null", async () => {
    const bad: [unknown, string][] = [
      [[1, 2], "metadata"],
      ["text", "metadata"],
      [42, "metadata"],
      [{ a: { b: 1 } }, "metadata.a"],
      [{ a: [1] }, "metadata.a"],
      [{ a: long(1001) }, "metadata.a"],
      [{ [long(65)]: 1 }, `metadata.${long(65)}`],
      [{ "": 1 }, "metadata."],
      [metadataOf(51), "metadata"],
    ];
    for (const [metadata, param] of bad) {
      await expectApiError(await post({ phone: "+33612345678", metadata }), 400, "invalid_request", {
        param,
      });
      await expectApiError(await patch({ metadata }), 400, "invalid_request", { param });
    }
  });

  test("the limits themselves are accepted", async () => {
    const metadata = { ...metadataOf(49), [long(64)]: long(1000) };
    const res = await post({ phone: "+123456789012345", name: long(200), email: "a@example.com", metadata });
    expect(res.status).toBe(201);
    expect((await res.json()).metadata).toEqual(metadata);
  });

  test("unknown fields are refused, also in PATCH; phone cannot be cleared", async () => {
    await expectApiError(await post({ phone: "+33612345678", livemode: false }), 400, "invalid_request", {
      param: "livemode",
    });
    await expectApiError(await patch({ id: "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }), 400, "invalid_request", {
      param: "id",
    });
    await expectApiError(await patch({ createdAt: "2026-01-01T00:00:00.000Z" }), 400, "invalid_request", {
      param: "createdAt",
    });
    await expectApiError(await patch({ phone: null }), 400, "invalid_request", { param: "phone" });
  });

  test("a body that is not an object, not JSON, not declared JSON, or too large", async () => {
    for (const json of [[], "x", 1, null]) await expectApiError(await post(json), 400, "invalid_request");
    const notJson = await ctx.request("/api/v1/contacts", {
      method: "POST",
      key: seed.testKey,
      headers: { "content-type": "application/json" },
      body: "{phone:",
    });
    await expectApiError(notJson, 400, "invalid_request");
    const noType = await ctx.request("/api/v1/contacts", {
      method: "POST",
      key: seed.testKey,
      body: JSON.stringify({ phone: "+33612345678" }),
    });
    await expectApiError(noType, 415, "unsupported_media_type");
    const big = await post({ phone: "+33612345678", name: long(70_000) });
    await expectApiError(big, 413, "payload_too_large");
  });

  test("nothing was created by the refused requests", async () => {
    const [row] = await ctx.deps
      .sql`select count(*)::int as n from contacts where organization_id = ${seed.org.id}`;
    expect(row!.n).toBe(2);
  });
});

describe("404 not_found", () => {
  const paths = () => [
    "abc",
    "ct_x",
    "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
    seed.agent.id,
    "ct_01jd8y3m6w9q2t4v5x7z8a9b0c",
    "%27%20or%201%3D1",
  ];
  test("GET, PATCH, DELETE of a malformed, unknown or other-type id", async () => {
    for (const id of paths()) {
      for (const [method, json] of [
        ["GET", undefined],
        ["PATCH", { name: "x" }],
        ["DELETE", undefined],
      ] as const) {
        const res = await ctx.request(`/api/v1/contacts/${id}`, { method, key: seed.testKey, json });
        expect({ id, method, status: res.status }).toEqual({ id, method, status: 404 });
        await expectApiError(res, 404, "not_found");
      }
    }
  });

  test("a contact of another organization is 404 for every verb and stays untouched", async () => {
    for (const [method, json] of [
      ["GET", undefined],
      ["PATCH", { name: "x" }],
      ["DELETE", undefined],
    ] as const) {
      const res = await ctx.request(`/api/v1/contacts/${contactId}`, { method, key: other.liveKey, json });
      expect(res.status).toBe(404);
    }
    const still = await ctx.request(`/api/v1/contacts/${contactId}`, { key: seed.liveKey });
    expect((await still.json()).name).toBeNull();
  });
});

describe("keys and scopes", () => {
  test("no key or a wrong key is 401 invalid_key on every route", async () => {
    for (const [method, path, json] of [
      ["POST", "/api/v1/contacts", { phone: "+33612345678" }],
      ["GET", "/api/v1/contacts", undefined],
      ["GET", `/api/v1/contacts/${contactId}`, undefined],
      ["PATCH", `/api/v1/contacts/${contactId}`, { name: "x" }],
      ["DELETE", `/api/v1/contacts/${contactId}`, undefined],
    ] as const) {
      for (const key of [undefined, "inf_test_nope", seed.publishable.key]) {
        const res = await ctx.request(path, { method, json, ...(key ? { key } : {}) });
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 401 });
        await expectApiError(res, 401, "invalid_key");
      }
    }
  });

  test("contacts:read reads only; contacts:write writes only", async () => {
    const c = ctx.deps;
    const reader = await createSecretKey(c, seed.org.id, { mode: "test", scopes: ["contacts:read"] });
    const writer = await createSecretKey(c, seed.org.id, { mode: "live", scopes: ["contacts:write"] });
    const routes = [
      ["POST", "/api/v1/contacts", { phone: "+33612345678" }, "write"],
      ["GET", "/api/v1/contacts", undefined, "read"],
      ["GET", `/api/v1/contacts/${contactId}`, undefined, "read"],
      ["PATCH", `/api/v1/contacts/${contactId}`, { name: "x" }, "write"],
    ] as const;
    for (const [method, path, json, needs] of routes) {
      const denied = needs === "read" ? writer.key : reader.key;
      const allowed = needs === "read" ? reader.key : writer.key;
      const res = await ctx.request(path, { method, json, key: denied });
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 403 });
      await expectApiError(res, 403, "missing_scope");
      const ok = await ctx.request(path, { method, json, key: allowed });
      expect(ok.status).toBeLessThan(300);
    }
    const del = await ctx.request(`/api/v1/contacts/${contactId}`, { method: "DELETE", key: reader.key });
    expect(del.status).toBe(403);
    const calls = await createSecretKey(c, seed.org.id, {
      mode: "live",
      scopes: ["calls:write", "events:read"],
    });
    const none = await ctx.request("/api/v1/contacts", {
      method: "POST",
      key: calls.key,
      json: { phone: "+33612345678" },
    });
    expect(none.status).toBe(403);
  });
});
