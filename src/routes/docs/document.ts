import { errorStatus } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { BODY_LIMIT, LARGE_BODY_LIMIT } from "../../http/body.ts";
import { VERSION } from "../../version.ts";
import { DELIVERY_ORDER } from "../events/webhooks.ts";

/**
 * The OpenAPI document served at /api/openapi.json: what the routes generate (their schemas, errors and
 * security), finished here with what is the same for every operation, written once rather than in each
 * route: the declared tags, the license, and the response headers every answer carries.
 */
export type OpenApiDocument = ReturnType<App["getOpenAPI31Document"]>;

/** One tag per resource; every operation names one of these (tests/http/openapi.document.test.ts). */
export const TAGS = [
  {
    name: "Web calls",
    description: "Browser calls to an agent: session tokens minted server-side, and the start.",
  },
  {
    name: "Calls",
    description: "Phone calls (live) and simulated calls (test), their transcripts and results.",
  },
  { name: "Campaigns", description: "Calls to a list of contacts, at a bounded concurrency, with retries." },
  { name: "Tasks", description: "Calls scheduled for later (`runAt`); live mode only." },
  {
    name: "Blocked numbers",
    description: "The organization's do-not-call list, consulted by live phone calls.",
  },
  { name: "Contacts", description: "The people an organization calls; real objects in both modes." },
  { name: "Agents", description: "The organization's voice agents (set by operators, read here)." },
  {
    name: "Knowledge bases",
    description: "Documents the agents search, chunked and indexed for full-text search.",
  },
  {
    name: "Events",
    description:
      "What happened, as listed by `GET /api/v1/events` (newest first) and sent to webhook endpoints. " +
      `${DELIVERY_ORDER} Order the events of one object by \`data.updatedAt\`, the time of the change each ` +
      "reports, strictly increasing per object (`data.createdAt` for `knowledge.document_ready`: a document " +
      "never changes), and keep the data with the latest one.",
  },
  { name: "Webhook endpoints", description: "URLs that receive events, signed per Standard Webhooks." },
  {
    name: "Admin",
    description: "The operators' API, enabled by `ADMIN_TOKEN`: organizations, agents and keys.",
  },
];

/** Headers declared once under `components.headers` and referenced from every response that carries them. */
const HEADERS = {
  "X-Request-Id": {
    description:
      "This request's id, `req_` + ULID; an error body repeats it as `error.requestId`. Quote it when reporting a problem.",
    required: true,
    schema: {
      type: "string",
      pattern: "^req_[0-9A-HJKMNP-TV-Z]{26}$",
      example: "req_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
    },
  },
  "Retry-After": {
    description: "Seconds to wait before trying again.",
    required: true,
    schema: { type: "integer", minimum: 1, example: 30 },
  },
} as const;

const ref = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` });

/** The headers of a response by status: every answer has a request id; every 429 says when to retry. */
function headersOf(status: string): Record<string, { $ref: string }> {
  return {
    "X-Request-Id": ref("X-Request-Id"),
    ...(status === "429" ? { "Retry-After": ref("Retry-After") } : {}),
  };
}

export function buildDocument(app: App): OpenApiDocument {
  const doc = app.getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Voice agent service API",
      version: VERSION,
      description: API_DESCRIPTION,
      // No public license: the service is distributed to its operators on their own terms. (OpenAPI 3.1's
      // SPDX `identifier` is missing from the generator's 3.0-era type, hence the cast.)
      license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" } as { name: string },
    },
    servers: [{ url: "/", description: "This server" }],
    tags: TAGS,
  });
  doc.components = { ...doc.components, headers: HEADERS };
  defaultsIntoDescriptions(doc);
  for (const item of Object.values(doc.paths ?? {})) {
    for (const op of [item.get, item.post, item.put, item.patch, item.delete]) {
      for (const [status, response] of Object.entries(op?.responses ?? {})) {
        if ("$ref" in response) continue;
        response.headers = { ...headersOf(status), ...response.headers };
      }
    }
  }
  return doc;
}

type Schema = Record<string, unknown>;

/**
 * A request field with a default may be left out, but generators read `default` as "always present":
 * openapi-typescript, with its default options, makes such a field of a named request schema required.
 * So the schemas that request bodies use carry no `default`; each such field says its default in its
 * description instead (the server applies it all the same).
 */
function defaultsIntoDescriptions(doc: OpenApiDocument) {
  const components = (doc.components?.schemas ?? {}) as Record<string, Schema>;
  const seen = new Set<Schema>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const n of node) visit(n);
      return;
    }
    if (!node || typeof node !== "object" || seen.has(node as Schema)) return;
    const schema = node as Schema;
    seen.add(schema);
    if (typeof schema.$ref === "string") visit(components[schema.$ref.replace("#/components/schemas/", "")]);
    for (const field of Object.values((schema.properties ?? {}) as Record<string, Schema>)) {
      if (!("default" in field)) continue;
      const said = typeof field.description === "string" ? field.description : "";
      if (!/\bDefault\b/.test(said)) {
        field.description = `${said}${said ? " " : ""}Default: \`${JSON.stringify(field.default)}\`.`;
      }
      delete field.default;
    }
    for (const value of Object.values(schema)) visit(value);
  };
  for (const item of Object.values(doc.paths ?? {})) {
    for (const op of [item.get, item.post, item.put, item.patch, item.delete]) {
      if (op?.requestBody) visit(op.requestBody);
    }
  }
}

const codesByStatus = new Map<number, string[]>();
for (const [code, status] of Object.entries(errorStatus)) {
  codesByStatus.set(status, [...(codesByStatus.get(status) ?? []), `\`${code}\``]);
}
const errorTable = [...codesByStatus]
  .sort(([a], [b]) => a - b)
  .map(([status, codes]) => `| ${status} | ${codes.join(", ")} |`)
  .join("\n");

const API_DESCRIPTION = `Web calls, single-use session tokens, test mode and cursor-paginated lists.

## Authentication
- **Secret keys** (\`inf_live_…\`, \`inf_test_…\`): \`Authorization: Bearer <key>\`, server side only. Each operation
  names the scope it needs (see the \`secretKey\` scheme).
- **Publishable keys** (\`inf_pub_…\`) and **session tokens** (\`inf_wcs_…\`) travel only in the body of
  \`POST /api/v1/web-calls\`, never in a header or a URL.

## Test mode
A test key (\`inf_test_…\`) calls the same operations as a live key; it sees and creates only simulated objects
(\`livemode: false\`), except contacts, which are real. Nothing that costs money or reaches a person happens.

## Requests
JSON only: a body needs \`Content-Type: application/json\` (415 \`unsupported_media_type\` otherwise), must be valid
JSON (400 \`invalid_request\`) and at most ${BODY_LIMIT / 1024} KiB (${LARGE_BODY_LIMIT / 1024 / 1024} MiB for
knowledge-base documents and call results; 413 \`payload_too_large\`). Every answer carries \`X-Request-Id\` (\`req_\` + ULID).

## Lists
Cursor lists take \`limit\` (1–100, default 20) and \`starting_after\` (the \`id\` of the last item received) and answer
\`{"data": [...], "has_more": bool}\`, newest first. To read everything, repeat with the last id until \`has_more\`
is false. A \`starting_after\` that does not belong to the list is 400 \`invalid_cursor\`. A query parameter that a cursor
list does not take (a misspelt filter, say) is 400 \`invalid_query\` naming it: never silently ignored.

A known path asked with another method is 405 \`method_not_allowed\`, its \`Allow\` header listing the methods it has.

## Live phone calls: configuration
Live keys place phone calls through LiveKit's SIP service. The server needs \`LIVEKIT_URL\`, \`LIVEKIT_API_KEY\` and
\`LIVEKIT_API_SECRET\`, and a carrier: an outbound SIP trunk created in LiveKit for your carrier (its id, \`ST_…\`), set
for every organization with \`LIVEKIT_SIP_TRUNK_ID\` and the caller number with \`LIVEKIT_SIP_FROM_NUMBER\` (E.164;
without it the trunk's own), or per organization as its \`sipTrunkId\` and \`callerNumber\` (admin API). Without a
trunk, live phone calls, tasks and campaigns answer 503 \`carrier_unavailable\`. Point LiveKit's webhooks at
\`/api/livekit/webhook\` on this server (verified with \`LIVEKIT_API_SECRET\`): they report when a call ends, so that its
duration and minutes are exact.

## Errors
Every error has one shape: \`{"error": {"code", "message", "param"?, "requestId"}}\`, where \`requestId\` equals the
\`X-Request-Id\` header. Decide on \`code\`, not on \`message\`. Every 429 carries \`Retry-After\` (seconds).

| Status | Codes |
|---|---|
${errorTable}
`;
