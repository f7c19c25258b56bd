import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestContext } from "../helpers/app.ts";
import { repeatsField } from "../helpers/errors.ts";
import { FULL_ENV, HTTP_METHODS } from "../helpers/openapi.ts";

/**
 * Checks over the whole OpenAPI document, every operation of `paths` and `webhooks` at once: a new
 * route that forgets one of these fails here without any test naming it. Each check is a function
 * listing what is wrong, so the last tests can prove that each one does find a fault.
 */

type Json = Record<string, unknown>;
interface Operation {
  label: string;
  section: "paths" | "webhooks";
  method: string;
  path: string;
  op: Json;
}

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());
const served = (await (await ctx.request("/api/openapi.json")).json()) as Json;

function operationsOf(doc: Json): Operation[] {
  const out: Operation[] = [];
  for (const section of ["paths", "webhooks"] as const) {
    for (const [path, item] of Object.entries((doc[section] ?? {}) as Record<string, Json>)) {
      for (const method of HTTP_METHODS) {
        const op = item[method] as Json | undefined;
        if (op) out.push({ label: `${section} ${method.toUpperCase()} ${path}`, section, method, path, op });
      }
    }
  }
  return out;
}

const CAMEL_CASE = /^[a-z][a-zA-Z0-9]*$/;

function operationIdProblems(doc: Json): string[] {
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const { label, op } of operationsOf(doc)) {
    const id = op.operationId;
    if (typeof id !== "string") problems.push(`${label}: no operationId`);
    else if (!CAMEL_CASE.test(id)) problems.push(`${label}: operationId ${id} is not camelCase`);
    else if (seen.has(id)) problems.push(`${label}: operationId ${id} also names ${seen.get(id)}`);
    else seen.set(id, label);
  }
  return problems;
}

function tagProblems(doc: Json): string[] {
  const problems: string[] = [];
  const declared = new Map(
    ((doc.tags ?? []) as { name: string; description?: string }[]).map((t) => [t.name, t]),
  );
  for (const [name, tag] of declared) if (!tag.description) problems.push(`tag ${name}: no description`);
  const used = new Set<string>();
  for (const { label, op } of operationsOf(doc)) {
    const tags = (op.tags ?? []) as string[];
    if (tags.length !== 1) problems.push(`${label}: ${tags.length} tags, not one`);
    for (const tag of tags) {
      used.add(tag);
      if (!declared.has(tag)) problems.push(`${label}: tag ${tag} is not declared at the top level`);
    }
  }
  for (const name of declared.keys()) if (!used.has(name)) problems.push(`tag ${name}: no operation`);
  return problems;
}

function securityProblems(doc: Json): string[] {
  return operationsOf(doc)
    .filter(({ op }) => !Array.isArray(op.security))
    .map(({ label }) => `${label}: no security key (public operations say security: [])`);
}

/** Every answer of the API carries X-Request-Id; every 429 Retry-After (and no other status has it to send). */
function headerProblems(doc: Json): string[] {
  const problems: string[] = [];
  const components = ((doc.components as Json).headers ?? {}) as Record<string, Json>;
  for (const { label, section, op } of operationsOf(doc)) {
    // A webhook's responses are the receiver's answers to this service, not answers of the API.
    if (section === "webhooks") continue;
    for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
      const headers = (response.headers ?? {}) as Record<string, { $ref?: string }>;
      const expected = ["X-Request-Id", ...(status === "429" ? ["Retry-After"] : [])];
      for (const name of expected) {
        const target = headers[name]?.$ref?.replace("#/components/headers/", "");
        if (!target || !components[target]) problems.push(`${label} ${status}: no ${name} header`);
      }
      if (status !== "429" && headers["Retry-After"])
        problems.push(`${label} ${status}: Retry-After is never sent`);
    }
  }
  return problems;
}

/**
 * Every write of the API reads its body (http/body.ts), one the operation takes or not: each says that it
 * may answer 400 (not JSON), 413 (too large) and 415 (not sent as JSON).
 */
function bodyRefusalProblems(doc: Json): string[] {
  const problems: string[] = [];
  for (const { label, section, method, op } of operationsOf(doc)) {
    if (section === "webhooks" || !["post", "put", "patch"].includes(method)) continue;
    const statuses = Object.keys(op.responses as Json);
    for (const status of ["400", "413", "415"]) {
      if (!statuses.includes(status)) problems.push(`${label}: no ${status}`);
    }
  }
  return problems;
}

/** Every `properties` map anywhere in the document (components, inline schemas, webhooks), with where it is. */
function propertyMaps(node: unknown, where = "#", out: [string, Record<string, Json>][] = []) {
  if (Array.isArray(node)) {
    for (const [i, n] of node.entries()) propertyMaps(n, `${where}/${i}`, out);
  } else if (node && typeof node === "object") {
    const props = (node as Json).properties;
    if (props && typeof props === "object") out.push([where, props as Record<string, Json>]);
    for (const [k, v] of Object.entries(node)) propertyMaps(v, `${where}/${k}`, out);
  }
  return out;
}

/** `createdAt`, `updatedAt`, `expiresAt`, `runAt`, …: a string named for a moment is a date-time. */
function timestampProblems(doc: Json): string[] {
  const problems: string[] = [];
  for (const [where, props] of propertyMaps(doc)) {
    for (const [name, schema] of Object.entries(props)) {
      if (!/At$/.test(name)) continue;
      const types = [schema.type].flat();
      if (types.includes("string") && schema.format !== "date-time")
        problems.push(`${where}/${name}: no date-time format`);
    }
  }
  return problems;
}

/** The schema a `$ref` names (or the schema itself). */
function resolve(doc: Json, schema: Json | undefined): Json | undefined {
  const ref = schema?.$ref;
  if (typeof ref !== "string") return schema;
  return ((doc.components as Json).schemas as Record<string, Json>)[ref.replace("#/components/schemas/", "")];
}

/** The field of an event's `data` that orders the events of one object: a document never changes. */
const orderField = (type: string) => (type === "knowledge.document_ready" ? "createdAt" : "updatedAt");

/**
 * Deliveries are unordered, so every event's `data` must say when its change happened: `updatedAt` (or
 * `createdAt` for an object that never changes), required, a date-time.
 */
function eventOrderProblems(doc: Json): string[] {
  const problems: string[] = [];
  for (const { label, path, section, op } of operationsOf(doc)) {
    if (section !== "webhooks") continue;
    const body = (op.requestBody as Json | undefined)?.content as
      | Record<string, { schema: Json }>
      | undefined;
    const payload = resolve(doc, body?.["application/json"]?.schema);
    const data = resolve(doc, (payload?.properties as Record<string, Json> | undefined)?.data);
    const field = orderField(path);
    const schema = (data?.properties as Record<string, Json> | undefined)?.[field];
    if (!schema) problems.push(`${label}: data has no ${field}`);
    else if (schema.type !== "string" || schema.format !== "date-time")
      problems.push(`${label}: data.${field} is not a date-time`);
    if (schema && !((data?.required ?? []) as string[]).includes(field))
      problems.push(`${label}: data.${field} is not required`);
  }
  return problems;
}

/** What a receiver must know, on the Events tag and on every webhook: at least once, unordered, how to cope. */
function deliveryNoticeProblems(doc: Json): string[] {
  const problems: string[] = [];
  const says = (where: string, text: unknown, fields: string[]) => {
    const said = typeof text === "string" ? text : "";
    for (const needed of [
      "at least once",
      "unordered",
      "`webhook-id`",
      ...fields.map((f) => `\`data.${f}\``),
    ]) {
      if (!said.includes(needed)) problems.push(`${where}: does not say ${needed}`);
    }
  };
  const events = ((doc.tags ?? []) as { name: string; description?: string }[]).find(
    (t) => t.name === "Events",
  );
  says("tag Events", events?.description, ["updatedAt", "createdAt"]);
  for (const { label, path, section, op } of operationsOf(doc)) {
    if (section === "webhooks") says(label, op.description, [orderField(path)]);
  }
  return problems;
}

/** An error example that names a field (`param`) names it once in its message: never "to: to must …". */
function errorExampleProblems(doc: Json): string[] {
  const problems: string[] = [];
  for (const { label, op } of operationsOf(doc)) {
    for (const [status, response] of Object.entries((op.responses ?? {}) as Record<string, Json>)) {
      const content = (response.content ?? {}) as Record<string, { examples?: Record<string, Json> }>;
      for (const [name, example] of Object.entries(content["application/json"]?.examples ?? {})) {
        const error = (example.value as { error?: { message?: string; param?: string } } | undefined)?.error;
        if (!error?.param || !error.message) continue;
        if (repeatsField(error.message, error.param))
          problems.push(`${label} ${status} ${name}: "${error.message}" names ${error.param} twice`);
      }
    }
  }
  return problems;
}

describe("every operation of the document", () => {
  test("has a unique camelCase operationId", () => {
    expect(operationIdProblems(served)).toEqual([]);
  });

  test("keeps the operationIds integrators' generated clients already use", () => {
    const ids = new Map(
      operationsOf(served).map((o) => [`${o.method.toUpperCase()} ${o.path}`, o.op.operationId]),
    );
    expect(ids.get("POST /api/v1/calls")).toBe("createCall");
    expect(ids.get("GET /api/v1/calls")).toBe("listCalls");
    expect(ids.get("GET /api/v1/calls/{id}")).toBe("getCall");
    expect(ids.get("POST /api/v1/web-calls")).toBe("startWebCall");
    expect(ids.get("POST /api/v1/web-call-sessions")).toBe("mintWebCallSession");
    expect(ids.get("POST /api/v1/contacts")).toBe("createContact");
    expect(ids.get("POST /api/admin/v1/organizations")).toBe("adminCreateOrganization");
    expect(ids.get("POST contact.deleted")).toBe("contactDeletedEvent");
  });

  test("has one tag, declared at the top level with a description; every declared tag is used", () => {
    expect(tagProblems(served)).toEqual([]);
  });

  test("says what security it needs, public ones with security: []", () => {
    expect(securityProblems(served)).toEqual([]);
    const webCalls = operationsOf(served).find((o) => o.label === "paths POST /api/v1/web-calls");
    expect(webCalls?.op.security).toEqual([]);
  });

  test("that writes says it may refuse the body: 400, 413, 415, whether it takes one or not", () => {
    expect(bodyRefusalProblems(served)).toEqual([]);
  });

  test("declares X-Request-Id on every response and Retry-After on every 429", () => {
    expect(headerProblems(served)).toEqual([]);
    const statuses = operationsOf(served).flatMap((o) => Object.keys(o.op.responses as Json));
    expect(statuses).toContain("429");
  });
});

test("every timestamp has format date-time", () => {
  expect(timestampProblems(served)).toEqual([]);
  const names = propertyMaps(served).flatMap(([, props]) => Object.keys(props).filter((n) => /At$/.test(n)));
  expect(new Set(names)).toEqual(
    new Set([
      "createdAt",
      "updatedAt",
      "startedAt",
      "endedAt",
      "completedAt",
      "expiresAt",
      "runAt",
      "revokedAt",
      "lastUsedAt",
      "failedAt",
      "previousSecretExpiresAt",
    ]),
  );
});

test("the answer of a web-call start is one of two shapes, told apart by livemode", () => {
  const schemas = (served.components as Json).schemas as Record<string, Json>;
  const start = operationsOf(served).find((o) => o.op.operationId === "startWebCall")!.op;
  const created = (start.responses as Record<string, Json>)["201"]!.content as Record<
    string,
    { schema: Json }
  >;
  expect(created["application/json"]!.schema).toEqual({ $ref: "#/components/schemas/WebCallStart" });
  const shapes = (schemas.WebCallStart!.oneOf as { $ref: string }[]).map((r) =>
    r.$ref.replace("#/components/schemas/", ""),
  );
  expect(shapes).toEqual(["LiveWebCall", "SimulatedWebCall"]);
  const livemodes = shapes.map((name) => {
    const shape = schemas[name] as { properties: Record<string, Json>; required: string[] };
    expect(shape.required).toContain("livemode");
    return shape.properties.livemode!.enum;
  });
  expect(livemodes).toEqual([[true], [false]]);
  const live = schemas.LiveWebCall as { required: string[] };
  const simulated = schemas.SimulatedWebCall as { required: string[]; properties: Json };
  expect(live.required).toContain("room");
  expect(simulated.required).toContain("simulated");
  expect(simulated.properties).not.toHaveProperty("room");
});

test("every event's data says when its change happened, so a receiver orders an object's events", () => {
  expect(eventOrderProblems(served)).toEqual([]);
  const webhooks = operationsOf(served).filter((o) => o.section === "webhooks");
  expect(webhooks.length).toBe(11);
});

test("the Events tag and every webhook say deliveries are at least once and unordered, and how to cope", () => {
  expect(deliveryNoticeProblems(served)).toEqual([]);
});

test("no error example names its field twice", () => {
  expect(errorExampleProblems(served)).toEqual([]);
  const params = operationsOf(served).flatMap(({ op }) =>
    Object.values((op.responses ?? {}) as Record<string, Json>).flatMap((r) =>
      Object.values(
        ((r.content as Record<string, { examples?: Record<string, Json> }> | undefined)?.["application/json"]
          ?.examples ?? {}) as Record<string, { value: { error: { param?: string } } }>,
      ).map((e) => e.value.error.param),
    ),
  );
  expect(params).toContain("to");
  expect(repeatsField("to must be a phone number", "to")).toBe(false);
  expect(repeatsField("phone must be a phone number", "phone")).toBe(false);
  expect(repeatsField("to: to must be a phone number", "to")).toBe(true);
  expect(repeatsField("contacts.0.phone: phone must be a phone number", "contacts.0.phone")).toBe(true);
  expect(repeatsField("contacts.0.phone contacts.0.phone must be set", "contacts.0.phone")).toBe(true);
});

test("the description says how a carrier is configured and where LiveKit sends its webhooks", () => {
  const description = String((served.info as Json).description);
  for (const words of [
    "LIVEKIT_SIP_TRUNK_ID",
    "LIVEKIT_SIP_FROM_NUMBER",
    "/api/livekit/webhook",
    "carrier_unavailable",
  ]) {
    expect(description).toContain(words);
  }
});

test("the document has a license", () => {
  const license = (served.info as Json).license as Json | undefined;
  expect(license?.name).toBeString();
  expect(license?.identifier ?? license?.url).toBeString();
});

test("each check finds a fault in a damaged copy of the document", () => {
  const doc = structuredClone(served);
  const ops = operationsOf(doc);
  const first = ops.find((o) => o.path === "/api/v1/calls" && o.method === "post")!.op;
  delete first.operationId;
  ops.find((o) => o.path === "/api/v1/calls" && o.method === "get")!.op.operationId = "getCall";
  delete ops.find((o) => o.path === "/api/v1/contacts" && o.method === "post")!.op.security;
  (ops.find((o) => o.path === "/api/v1/contacts" && o.method === "get")!.op.tags as string[]).push("Nowhere");
  const responses = first.responses as Record<string, Json>;
  delete (responses["201"]!.headers as Json)["X-Request-Id"];
  delete (responses["429"]!.headers as Json)["Retry-After"];
  delete (ops.find((o) => o.path === "/api/v1/campaigns/{id}/cancel")!.op.responses as Json)["415"];
  const contact = (doc.components as { schemas: Record<string, { properties: Record<string, Json> }> })
    .schemas.Contact!;
  delete contact.properties.updatedAt!.format;
  const schemas = (doc.components as { schemas: Record<string, Json> }).schemas;
  const call = schemas.Call as { properties: Record<string, Json>; required: string[] };
  call.required = call.required.filter((f) => f !== "updatedAt");
  delete (schemas.DocumentReady as { properties: Record<string, Json> }).properties.createdAt;
  const events = (doc.tags as { name: string; description: string }[]).find((t) => t.name === "Events")!;
  events.description = events.description.replaceAll("at least once", "once");
  const ended = ops.find((o) => o.path === "call.ended")!.op;
  ended.description = String(ended.description).replace("`webhook-id`", "the id");
  type Examples = Record<string, { value: { error: { message: string } } }>;
  const createCall = first.responses as Record<string, { content: Record<string, { examples: Examples }> }>;
  const example = createCall["400"]!.content["application/json"]!.examples.invalid_request!.value;
  example.error.message = `to: ${example.error.message}`;
  expect(operationIdProblems(doc)).toEqual([
    "paths POST /api/v1/calls: no operationId",
    "paths GET /api/v1/calls/{id}: operationId getCall also names paths GET /api/v1/calls",
  ]);
  expect(securityProblems(doc)).toEqual([
    "paths POST /api/v1/contacts: no security key (public operations say security: [])",
  ]);
  expect(tagProblems(doc)).toEqual([
    "paths GET /api/v1/contacts: 2 tags, not one",
    "paths GET /api/v1/contacts: tag Nowhere is not declared at the top level",
  ]);
  expect(timestampProblems(doc)).toEqual(["#/components/schemas/Contact/updatedAt: no date-time format"]);
  expect(headerProblems(doc)).toEqual([
    "paths POST /api/v1/calls 201: no X-Request-Id header",
    "paths POST /api/v1/calls 429: no Retry-After header",
  ]);
  expect(bodyRefusalProblems(doc)).toEqual(["paths POST /api/v1/campaigns/{id}/cancel: no 415"]);
  expect(eventOrderProblems(doc)).toEqual([
    "webhooks POST call.started: data.updatedAt is not required",
    "webhooks POST call.ended: data.updatedAt is not required",
    "webhooks POST call.analysis_ready: data.updatedAt is not required",
    // The timestamp check's fault, above, is also this one's.
    "webhooks POST contact.created: data.updatedAt is not a date-time",
    "webhooks POST contact.updated: data.updatedAt is not a date-time",
    "webhooks POST knowledge.document_ready: data has no createdAt",
  ]);
  expect(deliveryNoticeProblems(doc)).toEqual([
    "tag Events: does not say at least once",
    "webhooks POST call.ended: does not say `webhook-id`",
  ]);
  expect(errorExampleProblems(doc)).toEqual([
    `paths POST /api/v1/calls 400 invalid_request: "to: to must be a phone number in E.164 format, such as +33612345678" names to twice`,
  ]);
});

describe("Redocly's linter, `recommended` rules (redocly.yaml)", () => {
  const dir = mkdtempSync(join(tmpdir(), "openapi-lint-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Runs the CLI as an integrator would, offline: no telemetry, no update check. */
  function lint(doc: Json): {
    status: number | null;
    totals: { errors: number; warnings: number };
    problems: unknown[];
  } {
    const file = join(dir, "openapi.json");
    writeFileSync(file, JSON.stringify(doc));
    const run = spawnSync(
      "node_modules/.bin/redocly",
      ["lint", file, "--config", "redocly.yaml", "--format", "json"],
      {
        encoding: "utf8",
        timeout: 60_000,
        env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
      },
    );
    const report = JSON.parse(run.stdout) as {
      totals: { errors: number; warnings: number };
      problems: unknown[];
    };
    return { status: run.status, ...report };
  }

  test("finds no error and no warning in the document", () => {
    const { status, totals, problems } = lint(served);
    expect(problems).toEqual([]);
    expect(totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(status).toBe(0);
  });

  test("reports a fault (the check can fail)", () => {
    const doc = structuredClone(served);
    delete operationsOf(doc)[0]!.op.operationId;
    expect(lint(doc).totals.warnings).toBe(1);
  });
});
