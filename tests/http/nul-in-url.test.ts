import { afterAll, describe, expect, test } from "bun:test";
import { createTestContext, seedOrganization } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import {
  concretePath,
  type DocumentedOperation,
  FULL_ENV,
  fetchDocument,
  jsonBodyOf,
  type OpenApiParameter,
  operations,
  type SchemaObject,
  secretKeyScopes,
} from "../helpers/openapi.ts";

/**
 * PostgreSQL text cannot hold U+0000, so a NUL that reached a statement would be a 500. Bodies refuse
 * it (tests/http/bad-input.test.ts); here the URL: a NUL in any query parameter of any operation of the
 * document is 400 `invalid_query` naming that parameter, and in any path parameter the 404 `not_found`
 * of a malformed id. A new route is covered as soon as it is registered.
 */

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());
const seed = await seedOrganization(ctx);
const doc = await fetchDocument(ctx);
const all = operations(doc);

// Real objects behind the paths, so that a NUL that slipped through would reach a statement.
async function created(path: string, json: unknown): Promise<string> {
  const res = await ctx.request(path, { method: "POST", key: seed.liveKey, json });
  expect(res.status).toBe(201);
  const body = (await res.json()) as { id?: string; documentId?: string };
  return (body.id ?? body.documentId)!;
}
const contactId = await created("/api/v1/contacts", { phone: "+33612345678" });
const endpointId = await created("/api/v1/webhook-endpoints", { url: "http://127.0.0.1:9/hook" });
const documentId = await created(`/api/v1/knowledge-bases/${seed.kb.id}/documents`, {
  title: "Returns",
  text: "Returns are accepted within thirty days.",
});

/** The id of a real object for a path parameter, by the path segment before it. */
const REAL: Record<string, string> = {
  "knowledge-bases": seed.kb.id,
  documents: documentId,
  organizations: seed.org.id,
  agents: seed.agent.id,
  contacts: contactId,
  "webhook-endpoints": endpointId,
  "publishable-keys": seed.publishable.id,
  "secret-keys": seed.live.id,
};

function pathOf(o: DocumentedOperation, nulIn?: string): string {
  return o.path.replace(/\/([^/{]+)\/\{([^}]+)\}/g, (_, segment: string, name: string) => {
    const id = REAL[segment] ?? concretePath(`{${name}}`, o.op);
    return `/${segment}/${name === nulIn ? `${id}%00` : id}`;
  });
}

/** The operation's parameters, `$ref`s to `components/parameters` resolved. */
function parameters(o: DocumentedOperation): OpenApiParameter[] {
  const components = (doc.components as { parameters?: Record<string, OpenApiParameter> }).parameters ?? {};
  return (o.op.parameters ?? []).map((p) => {
    const ref = (p as { $ref?: string }).$ref;
    return ref ? components[ref.replace("#/components/parameters/", "")]! : p;
  });
}

/** The required query parameters with their documented example, so that only the path can be at fault. */
function requiredQuery(o: DocumentedOperation): string {
  const required = parameters(o).filter((p) => p.in === "query" && p.required);
  return required.map((p) => `&${p.name}=${encodeURIComponent(String(p.schema?.example))}`).join("");
}

/** A body the route accepts: the documented example, else the examples of the schema's required fields. */
function exampleBody(o: DocumentedOperation): unknown {
  const media = jsonBodyOf(o.op);
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  const ref = media.schema?.$ref?.replace("#/components/schemas/", "");
  const schema = (ref ? doc.components?.schemas?.[ref] : media.schema) as SchemaObject | undefined;
  const fields = (schema?.required ?? []).map((name) => {
    const field = schema?.properties?.[name] as { example?: unknown } | undefined;
    return [name, field?.example] as const;
  });
  return Object.fromEntries(fields);
}

/** With a credential that gets past the route's check, and a body it accepts if it takes one. */
function send(o: DocumentedOperation, path: string): Promise<Response> {
  const authorization = secretKeyScopes(o.op) ? seed.liveKey : FULL_ENV.ADMIN_TOKEN;
  const body = exampleBody(o);
  return ctx.request(path, {
    method: o.method.toUpperCase(),
    headers: { authorization: `Bearer ${authorization}` },
    ...(body !== undefined ? { json: body } : {}),
  });
}

const withQuery = all.flatMap((o) =>
  parameters(o)
    .filter((p) => p.in === "query")
    .map((p) => [`${o.label} ?${p.name}`, o, p.name] as const),
);
const withPathIds = all.flatMap((o) =>
  parameters(o)
    .filter((p) => p.in === "path")
    .map((p) => [`${o.label} {${p.name}}`, o, p.name] as const),
);

test("the document has operations with query and path parameters, the search among them", () => {
  expect(withQuery.map(([label]) => label)).toContain("GET /api/v1/knowledge-bases/{id}/search ?q");
  expect(withQuery.length).toBeGreaterThan(10);
  expect(withPathIds.length).toBeGreaterThan(10);
});

describe("a NUL character in a query value is 400 invalid_query naming the parameter", () => {
  test.each(withQuery)("%s", async (label, o, name) => {
    for (const value of ["%00", "a%00b", "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C%00"]) {
      const res = await send(o, `${pathOf(o)}?${encodeURIComponent(name)}=${value}`);
      const { error } = await expectApiError(res, 400, "invalid_query", { param: name, label });
      expect(error.message).toContain("NUL");
    }
  });

  test("in the search query, with the other parameter valid, and the search itself still answers", async () => {
    const path = `/api/v1/knowledge-bases/${seed.kb.id}/search`;
    const refused = await ctx.request(`${path}?limit=3&q=thirty%00days`, { key: seed.liveKey });
    await expectApiError(refused, 400, "invalid_query", { param: "q" });
    const res = await ctx.request(`${path}?limit=3&q=thirty%20days`, { key: seed.liveKey });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { results: { documentId: string }[] };
    expect(body.results.map((r) => r.documentId)).toEqual([documentId]);
  });
});

describe("a NUL character in a path parameter is 404 not_found, as a malformed id is", () => {
  test.each(withPathIds)("%s", async (label, o, name) => {
    const query = requiredQuery(o);
    const res = await send(o, `${pathOf(o, name)}${query ? `?${query.slice(1)}` : ""}`);
    await expectApiError(res, 404, "not_found", { label });
  });
});
