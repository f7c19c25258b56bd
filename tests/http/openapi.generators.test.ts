import { afterAll, expect, test } from "bun:test";
import { createTestContext } from "../helpers/app.ts";
import { FULL_ENV } from "../helpers/openapi.ts";

/**
 * What a common generator makes of the document. openapi-typescript, with its default options
 * (`defaultNonNullable`), types a schema property that has a `default` as always present: in a named
 * request schema that would make an integrator send fields the server fills in itself. The document
 * therefore keeps defaults out of the schemas request bodies use (routes/docs/document.ts).
 */

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());
const doc = (await (await ctx.request("/api/openapi.json")).json()) as Record<string, unknown>;

type Schema = Record<string, unknown>;
const components = (doc.components as { schemas: Record<string, Schema> }).schemas;

/** The named schemas request bodies use, directly or through other schemas. */
function requestSchemas(): Set<string> {
  const names = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const n of node) visit(n);
    } else if (node && typeof node === "object") {
      const ref = (node as Schema).$ref;
      if (typeof ref === "string" && ref.startsWith("#/components/schemas/")) {
        const name = ref.replace("#/components/schemas/", "");
        if (!names.has(name)) {
          names.add(name);
          visit(components[name]);
        }
      }
      for (const v of Object.values(node)) visit(v);
    }
  };
  for (const item of Object.values(doc.paths as Record<string, Record<string, Schema>>)) {
    for (const op of Object.values(item)) visit(op.requestBody);
  }
  return names;
}

/** Every property under `node` that has a default, as `where.name`. */
function defaultsUnder(node: unknown, where: string, out: string[] = []): string[] {
  if (Array.isArray(node)) {
    for (const n of node) defaultsUnder(n, where, out);
  } else if (node && typeof node === "object") {
    for (const [name, field] of Object.entries(
      ((node as Schema).properties ?? {}) as Record<string, Schema>,
    )) {
      if ("default" in field) out.push(`${where}.${name}`);
    }
    for (const v of Object.values(node)) defaultsUnder(v, where, out);
  }
  return out;
}

test("no schema a request body uses carries a default; the description says it", () => {
  const names = [...requestSchemas()];
  expect(names).toContain("CreateCampaignRequest");
  expect(names.flatMap((n) => defaultsUnder(components[n], n))).toEqual([]);
  // Nor does a named schema itself (one that a create defaults would carry it into an update too).
  expect(names).toContain("CallWindow");
  expect(names.filter((n) => "default" in (components[n] as Schema))).toEqual([]);
  const inline = Object.values(doc.paths as Record<string, Record<string, Schema>>).flatMap((item) =>
    Object.values(item).flatMap((op) => defaultsUnder(op.requestBody, "requestBody")),
  );
  expect(inline).toEqual([]);
  const campaign = components.CreateCampaignRequest as { properties: Record<string, Schema> };
  expect(campaign.properties.concurrency!.description).toContain("Default: `5`.");
});

test("openapi-typescript with its default options leaves every defaulted request field optional", async () => {
  // openapi-typescript builds its output with TypeScript 5's compiler API, installed as `typescript5`
  // (the project's `typescript` is TypeScript 7, which has none).
  Bun.plugin({
    name: "typescript-5-compiler-api",
    setup(build) {
      build.onLoad({ filter: /node_modules\/typescript\/lib\/.*/ }, () => ({
        contents: 'export * from "typescript5"; export { default } from "typescript5";',
        loader: "js",
      }));
    },
  });
  const { default: openapiTS, astToString } = await import("openapi-typescript");
  const types = astToString(await openapiTS(structuredClone(doc) as never));
  /** The properties of a generated schema type, each with `?` when optional. */
  const fieldsOf = (name: string): string[] => {
    // A schema's type ends at the first closing brace at its own indentation (`};`, or `} | null;`).
    const block = new RegExp(`\\n {8}${name}: \\{\\n([\\s\\S]*?)\\n {8}\\}[; ]`).exec(types)?.[1] ?? "";
    return [...block.matchAll(/^ {12}(?:"([^"]+)"|(\w+))(\??):/gm)].map((m) => `${m[1] ?? m[2]}${m[3]}`);
  };
  expect(fieldsOf("CreateCampaignRequest")).toEqual(
    expect.arrayContaining(["name", "agentId", "concurrency?", "maxAttempts?", "retryDelaySeconds?"]),
  );
  expect(fieldsOf("CreateOrganizationRequest")).toEqual(
    expect.arrayContaining(["name", "paidPlan?", "planMinutes?", "maxConcurrentCalls?", "maxCallsPerHour?"]),
  );
  expect(fieldsOf("CreateAgentRequest")).toEqual(expect.arrayContaining(["name", "active?"]));
  // Generally: a request schema's field is required in the types exactly when the document requires it.
  for (const name of requestSchemas()) {
    const schema = components[name] as { properties?: Record<string, Schema>; required?: string[] };
    if (!schema.properties) continue;
    const expected = Object.keys(schema.properties).map((k) => (schema.required?.includes(k) ? k : `${k}?`));
    expect({ name, fields: fieldsOf(name).sort() }).toEqual({ name, fields: expected.sort() });
  }
});

test("the request forms the server refuses are outside the schema too: one of two forms, ids not repeated", () => {
  const schema = (name: string) =>
    components[name] as Schema & { oneOf?: unknown; properties: Record<string, Schema> };
  expect(schema("WebCallStartRequest").oneOf).toEqual([
    { required: ["publishableKey"] },
    {
      required: ["sessionToken"],
      not: {
        anyOf: [
          { properties: { publishableKey: { type: "string" } }, required: ["publishableKey"] },
          { properties: { captchaToken: { type: "string" } }, required: ["captchaToken"] },
        ],
      },
    },
  ]);
  expect(schema("CreateCampaignRequest").oneOf).toEqual([
    { required: ["contacts"] },
    { required: ["contactIds"] },
  ]);
  expect(schema("CreateCampaignRequest").properties.contactIds).toMatchObject({ uniqueItems: true });
});
