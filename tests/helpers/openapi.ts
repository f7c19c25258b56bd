import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../src/deps.ts";
import { errorResponses } from "../../src/errors.ts";
import type { App } from "../../src/http/appEnv.ts";
import { requireSecretKey } from "../../src/http/secretKey.ts";
import type { TestContext } from "./app.ts";

/**
 * The OpenAPI document as the cross-cutting tests see it (tests/http/openapi, security, bad-input).
 * Those tests walk every operation of the document, so a new route is covered the day it is
 * registered, without editing them. What a route must declare for that to work:
 *
 * - `security: [{ secretKey: ["<scope>"] }]` when it takes a secret key: the one scope it checks.
 * - `request.body.content["application/json"]` when it takes a JSON body.
 * - `...errorResponses(...)` with every code it can answer.
 *
 * A route registered only when an optional setting is present must be enabled by FULL_ENV below.
 */

/** Environment that turns on every optional feature, so that every route is registered. */
export const FULL_ENV: Record<string, string> = {
  ADMIN_TOKEN: "admin-token-for-tests-0123456789abcdef",
  // Port 9 (discard) on loopback: any request that should never leave the test fails at once.
  LIVEKIT_URL: "http://127.0.0.1:9",
  LIVEKIT_API_KEY: "test-api-key",
  LIVEKIT_API_SECRET: "test-api-secret-0123456789abcdef",
  RECAPTCHA_SECRET: "test-recaptcha-secret",
  RECAPTCHA_VERIFY_URL: "http://127.0.0.1:9/siteverify",
  WEBHOOK_ALLOW_PRIVATE_URLS: "true",
};

export const HTTP_METHODS = ["get", "post", "put", "patch", "delete"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export interface OpenApiParameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  schema?: { example?: unknown; examples?: unknown[] };
  example?: unknown;
}

/** A schema, as far as the tests read one. */
export interface SchemaObject {
  $ref?: string;
  type?: string | string[];
  allOf?: SchemaObject[];
  oneOf?: SchemaObject[];
  properties?: Record<string, SchemaObject>;
  required?: string[];
  enum?: unknown[];
  format?: string;
  default?: unknown;
  example?: unknown;
}

export interface MediaType {
  schema?: SchemaObject;
  example?: unknown;
  examples?: Record<string, { summary?: string; value?: unknown }>;
}

export interface OpenApiResponse {
  description: string;
  content?: Record<string, MediaType>;
}

export interface OpenApiOperation {
  summary?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: OpenApiParameter[];
  requestBody?: { required?: boolean; content?: Record<string, MediaType> };
  responses: Record<string, OpenApiResponse>;
}

export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Partial<Record<HttpMethod, OpenApiOperation>>>;
  components?: { securitySchemes?: Record<string, unknown>; schemas?: Record<string, unknown> };
}

export interface DocumentedOperation {
  method: HttpMethod;
  /** OpenAPI form, e.g. `/api/v1/calls/{id}`. */
  path: string;
  op: OpenApiOperation;
  /** `GET /api/v1/calls/{id}`: test names. */
  label: string;
}

/** The document served at /api/openapi.json, read like a client would. */
export async function fetchDocument(ctx: Pick<TestContext, "request">): Promise<OpenApiDocument> {
  const res = await ctx.request("/api/openapi.json");
  if (res.status !== 200) throw new Error(`/api/openapi.json answered ${res.status}`);
  return (await res.json()) as OpenApiDocument;
}

export function operations(doc: OpenApiDocument): DocumentedOperation[] {
  const out: DocumentedOperation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (op) out.push({ method, path, op, label: `${method.toUpperCase()} ${path}` });
    }
  }
  return out;
}

/** Paths that serve the document itself; they are not operations of the API. */
export function isDocsPath(path: string): boolean {
  return path === "/api/openapi.json" || path === "/api/docs" || path.startsWith("/api/docs/");
}

/**
 * Every API route the Hono router serves, as `METHOD /path/{param}`. Middleware (method ALL),
 * CORS preflights (OPTIONS), routes outside /api (the widget files) and the docs are left out.
 */
export function servedRoutes(app: App): Set<string> {
  const out = new Set<string>();
  for (const r of app.routes) {
    const method = r.method.toLowerCase();
    if (!(HTTP_METHODS as readonly string[]).includes(method)) continue;
    if (!r.path.startsWith("/api/") || isDocsPath(r.path)) continue;
    out.add(`${method.toUpperCase()} ${honoToOpenApiPath(r.path)}`);
  }
  return out;
}

/** `/api/v1/calls/:id{[a-z0-9_]+}` → `/api/v1/calls/{id}` */
export function honoToOpenApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?\??/g, "{$1}");
}

/** The scope an operation declares in its `secretKey` requirement, or null if it takes no secret key. */
export function secretKeyScopes(op: OpenApiOperation): string[] | null {
  const req = op.security?.find((s) => "secretKey" in s);
  return req ? (req.secretKey ?? []) : null;
}

export function jsonBodyOf(op: OpenApiOperation): MediaType | undefined {
  const content = op.requestBody?.content ?? {};
  const type = Object.keys(content).find((t) => /^application\/([a-z0-9.-]+\+)?json$/i.test(t));
  return type ? content[type] : undefined;
}

/** Fills the path parameters with their example, or a well-formed id when none is given. */
export function concretePath(path: string, op: OpenApiOperation): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const p = op.parameters?.find((q) => q.in === "path" && q.name === name);
    const example = p?.example ?? p?.schema?.example ?? p?.schema?.examples?.[0];
    return encodeURIComponent(typeof example === "string" ? example : "obj_01JD8Y3M6W9Q2T4V5X7Z8A9B0C");
  });
}

/** The codes an error response documents, from its examples (one per code, see errorResponses). */
export function documentedCodes(res: OpenApiResponse | undefined): string[] {
  return Object.keys(res?.content?.["application/json"]?.examples ?? {});
}

/**
 * A route shaped like the product's write routes (path id, secret key with one scope, JSON body),
 * added to a test app before its first request. The cross-cutting tests run on it as well as on the
 * real operations, so they prove their own checks even where the document has few write routes.
 */
export function addFixtureWriteRoute(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/test-fixtures/{id}/echo",
    tags: ["Test fixture"],
    summary: "Echo (test fixture)",
    security: [{ secretKey: ["calls:write"] }],
    middleware: [requireSecretKey(deps, "calls:write")] as const,
    request: {
      params: z.object({ id: z.string().openapi({ example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }) }),
      body: {
        required: true,
        content: {
          "application/json": {
            schema: z.object({ agentId: z.string(), padding: z.string().optional() }).strict(),
          },
        },
      },
    },
    responses: {
      201: {
        description: "The echoed body.",
        content: { "application/json": { schema: z.object({ id: z.string(), agentId: z.string() }) } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "missing_scope",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, (c) =>
    c.json({ id: c.req.valid("param").id, agentId: c.req.valid("json").agentId }, 201),
  );
}
