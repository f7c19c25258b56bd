import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestContext } from "../helpers/app.ts";
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
  const contact = (doc.components as { schemas: Record<string, { properties: Record<string, Json> }> })
    .schemas.Contact!;
  delete contact.properties.updatedAt!.format;
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
