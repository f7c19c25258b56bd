import { afterAll, describe, expect, test } from "bun:test";
import { gunzipSync } from "node:zlib";
import { Validator } from "@seriousme/openapi-schema-validator";
import { SCOPES } from "../../src/auth/scopes.ts";
import { type ErrorCode, errorStatus } from "../../src/errors.ts";
import { EVENT_TYPES, type EventType } from "../../src/services/events.ts";
import { createTestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import {
  documentedCodes,
  FULL_ENV,
  fetchDocument,
  jsonBodyOf,
  type OpenApiDocument,
  operations,
  secretKeyScopes,
  servedRoutes,
} from "../helpers/openapi.ts";

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());
const doc = await fetchDocument(ctx);
const ops = operations(doc);

/** The routes the router serves that the document does not describe, and the reverse. */
function coverage(served: Set<string>, document: OpenApiDocument) {
  const documented = new Set(operations(document).map((o) => o.label));
  return {
    undocumented: [...served].filter((r) => !documented.has(r)),
    unserved: [...documented].filter((r) => !served.has(r)),
  };
}

describe("the webhooks section", () => {
  const webhooks = (doc as unknown as { webhooks: Record<string, { post: Record<string, never> }> }).webhooks;
  const schemas = doc.components?.schemas as Record<
    string,
    { properties: Record<string, Record<string, unknown>> }
  >;
  const expectedData: Record<EventType, string> = {
    "call.started": "Call",
    "call.ended": "Call",
    "call.transcript_ready": "Transcript",
    "call.analysis_ready": "Call",
    "campaign.started": "Campaign",
    "campaign.completed": "Campaign",
    "campaign.cancelled": "Campaign",
    "contact.created": "Contact",
    "contact.updated": "Contact",
    "contact.deleted": "DeletedContact",
    "knowledge.document_ready": "DocumentReady",
  };

  test("describes every event type: its envelope, its object and the signature headers", () => {
    expect(Object.keys(webhooks).sort()).toEqual([...EVENT_TYPES].sort());
    for (const type of EVENT_TYPES) {
      const post = webhooks[type]!.post as unknown as {
        parameters: { name: string; in: string }[];
        requestBody: { content: Record<string, { schema: { $ref: string } }> };
        responses: Record<string, unknown>;
      };
      const ref = post.requestBody.content["application/json"]!.schema.$ref;
      const payload = schemas[ref.replace("#/components/schemas/", "")]!;
      expect(Object.keys(payload.properties).sort()).toEqual(["createdAt", "data", "id", "livemode", "type"]);
      expect(payload.properties.type).toMatchObject({ enum: [type] });
      expect(payload.properties.data!.$ref).toBe(`#/components/schemas/${expectedData[type]}`);
      expect(post.parameters.filter((p) => p.in === "header").map((p) => p.name)).toEqual([
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
      ]);
      expect(Object.keys(post.responses)).toEqual(["200"]);
    }
  });
});

describe("/api/openapi.json", () => {
  test("is a valid OpenAPI 3.1 document", async () => {
    const result = await new Validator().validate(structuredClone(doc) as unknown as Record<string, unknown>);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toStartWith("3.1.");
  });

  test("is public JSON that any origin may read", async () => {
    const res = await ctx.request("/api/openapi.json", { headers: { origin: "https://tools.example" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("application/json");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
  });

  test("describes every API route the server serves, with its method, and nothing else", () => {
    expect(ops.length).toBeGreaterThan(0);
    expect(coverage(servedRoutes(ctx.app), doc)).toEqual({ undocumented: [], unserved: [] });
  });

  test("the coverage check catches a route missing from the document", async () => {
    const other = await createTestContext({ env: FULL_ENV });
    try {
      other.app.get("/api/v1/undocumented/:id", (c) => c.json({}));
      const { undocumented } = coverage(servedRoutes(other.app), await fetchDocument(other));
      expect(undocumented).toEqual(["GET /api/v1/undocumented/{id}"]);
    } finally {
      await other.close();
    }
  });

  test("defines the security schemes its operations use", () => {
    const schemes = Object.keys(doc.components?.securitySchemes ?? {});
    expect(schemes).toContain("secretKey");
    const used = new Set(ops.flatMap(({ op }) => (op.security ?? []).flatMap((r) => Object.keys(r))));
    expect(schemes).toEqual(expect.arrayContaining([...used]));
  });
});

describe.each(ops.map((o) => [o.label, o] as const))("%s", (_label, { op, path }) => {
  const errorStatuses = Object.keys(op.responses).filter((s) => Number(s) >= 400);

  test("lists its error responses in the one envelope, code an enum of its codes, with an example per code", () => {
    expect(errorStatuses.length).toBeGreaterThan(0);
    for (const status of errorStatuses) {
      const media = op.responses[status]?.content?.["application/json"];
      const [envelope, narrowed] = media?.schema?.allOf ?? [];
      expect(envelope?.$ref).toBe("#/components/schemas/Error");
      const codes = documentedCodes(op.responses[status]);
      expect(codes.length).toBeGreaterThan(0);
      // The enum and the examples both come from the route's errorResponses(...): the same codes.
      expect([...(narrowed?.properties?.error?.properties?.code?.enum ?? [])].sort()).toEqual(
        [...codes].sort(),
      );
      for (const code of codes) {
        // Each example sits under the status its code is answered with.
        expect(`${code} → ${errorStatus[code as ErrorCode]}`).toBe(`${code} → ${status}`);
        const value = media?.examples?.[code]?.value as { error: { code: string } };
        expect(value.error.code).toBe(code);
      }
    }
  });

  test("documents the errors its inputs can cause", () => {
    const codes = errorStatuses.flatMap((s) => documentedCodes(op.responses[s]));
    const scopes = secretKeyScopes(op);
    if (scopes) {
      expect(scopes).toHaveLength(1);
      expect(SCOPES as readonly string[]).toContain(scopes[0]!);
      expect(codes).toEqual(expect.arrayContaining(["invalid_key", "missing_scope"]));
    }
    if (jsonBodyOf(op)) {
      expect(codes).toEqual(
        expect.arrayContaining(["invalid_request", "payload_too_large", "unsupported_media_type"]),
      );
    }
    if (/\{[^}]+\}/.test(path)) expect(codes).toContain("not_found");
    if (op.parameters?.some((p) => p.in === "query")) expect(codes).toContain("invalid_query");
  });
});

describe("/api/docs", () => {
  const assetUrls = async () => {
    const html = await (await ctx.request("/api/docs")).text();
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    return refs
      .filter((r) => !r.startsWith("data:"))
      .map((r) => new URL(r, "http://localhost/api/docs").pathname);
  };

  test("is an HTML page under a strict Content-Security-Policy, with no inline script or style", async () => {
    const res = await ctx.request("/api/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/html");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain("unsafe-");
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i);
    expect(html).not.toMatch(/https?:\/\//);
  });

  test("serves its scripts and styles itself, cached for a year under content-hashed names", async () => {
    const urls = await assetUrls();
    expect(urls.length).toBe(3);
    for (const url of urls) {
      expect(url).toMatch(/^\/api\/docs\/assets\/[a-z-]+\.[0-9a-f]{12}\.(js|css)$/);
      const res = await ctx.request(url);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toStartWith(
        url.endsWith(".js") ? "text/javascript" : "text/css",
      );
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(100);
    }
  });

  test("assets are gzipped for clients that accept it and answer 304 to a matching ETag", async () => {
    const url = (await assetUrls()).find((u) => u.includes("swagger-ui-bundle"))!;
    const plain = new Uint8Array(await (await ctx.request(url)).arrayBuffer());
    const zipped = await ctx.request(url, { headers: { "accept-encoding": "br, gzip" } });
    expect(zipped.headers.get("content-encoding")).toBe("gzip");
    const zippedBytes = new Uint8Array(await zipped.arrayBuffer());
    expect(zippedBytes.byteLength).toBeLessThan(plain.byteLength / 2);
    expect(gunzipSync(zippedBytes).equals(plain)).toBe(true);
    const refused = await ctx.request(url, { headers: { "accept-encoding": "gzip;q=0" } });
    expect(refused.headers.get("content-encoding")).toBeNull();
    const etag = zipped.headers.get("etag")!;
    const again = await ctx.request(url, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
  });

  test("with a trailing slash, redirects to the page (relative, so a proxy's prefix is kept)", async () => {
    const res = await ctx.request("/api/docs/", { redirect: "manual" });
    expect(res.status).toBe(301);
    expect(res.headers.get("location")).toBe("../docs");
    expect(new URL(res.headers.get("location")!, "http://localhost/prefix/api/docs/").pathname).toBe(
      "/prefix/api/docs",
    );
    const page = await ctx.request(
      new URL(res.headers.get("location")!, "http://localhost/api/docs/").pathname,
    );
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toStartWith("text/html");
  });

  test("an unknown asset is a JSON 404 not_found", async () => {
    const res = await ctx.request("/api/docs/assets/swagger-ui-bundle.000000000000.js");
    await expectApiError(res, 404, "not_found");
  });
});
