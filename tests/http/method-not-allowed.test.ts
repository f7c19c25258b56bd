import { afterAll, describe, expect, test } from "bun:test";
import { createTestContext } from "../helpers/app.ts";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import {
  concretePath,
  FULL_ENV,
  fetchDocument,
  HTTP_METHODS,
  type OpenApiOperation,
} from "../helpers/openapi.ts";

/**
 * A known path asked with a method it does not serve is 405 `method_not_allowed` with an `Allow`
 * header naming the methods it does serve, over every path of the document; an unknown path is 404.
 */

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());
const doc = await fetchDocument(ctx);

/** The Allow header a path must answer: its documented methods, and HEAD wherever GET is served. */
function allowOf(item: Partial<Record<string, OpenApiOperation>>): string {
  const methods = HTTP_METHODS.filter((m) => item[m]).map((m) => m.toUpperCase());
  if (methods.includes("GET")) methods.push("HEAD");
  const order = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
  return methods.sort((a, b) => order.indexOf(a) - order.indexOf(b)).join(", ");
}

const cases = Object.entries(doc.paths).flatMap(([path, item]) => {
  const op = Object.values(item)[0]!;
  const concrete = concretePath(path, op);
  return HTTP_METHODS.filter((m) => !item[m]).map(
    (m) => [`${m.toUpperCase()} ${path}`, m.toUpperCase(), concrete, allowOf(item)] as const,
  );
});

test("the document has paths with methods they do not serve", () => {
  expect(cases.length).toBeGreaterThan(20);
});

describe.each(cases)("%s", (_label, method, path, allow) => {
  test(`is 405 method_not_allowed, Allow: ${allow}`, async () => {
    const res = await ctx.request(path, {
      method,
      ...(method === "GET" || method === "DELETE" ? {} : { json: {} }),
      headers: { authorization: `Bearer ${FULL_ENV.ADMIN_TOKEN}` },
    });
    const { error } = await expectApiError(res, 405, "method_not_allowed");
    expect(res.headers.get("allow")).toBe(allow);
    expect(error.message).toContain(method);
  });
});

describe("around it", () => {
  test("a path with an id matches whatever the id: /api/v1/calls/{id}", async () => {
    for (const id of ["call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "anything", "x%20y"]) {
      const res = await ctx.request(`/api/v1/calls/${id}`, { method: "DELETE" });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, HEAD");
    }
  });

  test("HEAD on a path served only by POST is 405 without a body; on a GET path it is served", async () => {
    const head = await ctx.request("/api/v1/web-call-sessions", { method: "HEAD" });
    expect(head.status).toBe(405);
    expect(head.headers.get("allow")).toBe("POST");
    expect(await head.text()).toBe("");
    const get = await ctx.request("/api/v1/agents", { method: "HEAD" });
    expect(get.status).toBe(401);
  });

  test("the CORS preflight of /api/v1/web-calls still answers 204", async () => {
    const res = await ctx.request("/api/v1/web-calls", {
      method: "OPTIONS",
      headers: {
        origin: "https://shop.example.com",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
  });

  test("an unknown path is 404 not_found, whatever the method", async () => {
    for (const method of ["GET", "POST", "DELETE"]) {
      for (const path of ["/api/v1/nope", "/api/v1/calls/x/nope", "/api/v2/calls", "/nope"]) {
        const res = await ctx.request(path, { method });
        expect(await outcomeOf(res)).toBe("404 not_found");
        expect(res.headers.get("allow")).toBeNull();
      }
    }
  });

  test("without ADMIN_TOKEN the admin API does not exist: a wrong method there is 404 too", async () => {
    const plain = await createTestContext();
    try {
      const res = await plain.request("/api/admin/v1/organizations", { method: "GET" });
      expect(await outcomeOf(res)).toBe("404 not_found");
      expect(res.headers.get("allow")).toBeNull();
      const api = await plain.request("/api/v1/calls", { method: "PUT", json: {} });
      expect(api.status).toBe(405);
    } finally {
      await plain.close();
    }
  });
});
