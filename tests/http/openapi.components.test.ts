import { afterAll, expect, test } from "bun:test";
// The library behind `.openapi("Name")` (through @hono/zod-openapi): how it reads a schema's name, and
// its generator, to see what each named schema alone would document.
import { getRefId, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { App } from "../../src/http/appEnv.ts";
import { createTestContext } from "../helpers/app.ts";
import { FULL_ENV } from "../helpers/openapi.ts";

/**
 * A component name of the document stands for one schema. The generator keeps the first schema it
 * meets under a name and makes every later one with that name a `$ref` to it, silently: a second,
 * different schema registered as `.openapi("Name")` is documented as the first (an upload's answer
 * documented as a webhook's data). So every schema that the app's routes and webhooks reach is
 * collected, with its name, and each name must stand for one generated shape.
 */

const ctx = await createTestContext({ env: FULL_ENV });
afterAll(() => ctx.close());

type Zod = z.ZodType & { _zod: { def: Record<string, unknown> } };
const isZod = (v: unknown): v is Zod =>
  typeof v === "object" &&
  v !== null &&
  "_zod" in v &&
  typeof (v as { openapi?: unknown }).openapi === "function";

/** Wrappers that carry their inner schema's name without being another schema of that name. */
const WRAPPERS = new Set(["optional", "nullable", "default", "prefault", "readonly", "nonoptional", "catch"]);

/** Every named zod schema that `root` reaches (route configs, schemas, their parts), with where it was met. */
function namedSchemas(root: unknown, where: string, out: Map<Zod, string>, seen = new Set<unknown>()) {
  const visit = (node: unknown): void => {
    if (node === null || typeof node !== "object" || seen.has(node)) return;
    seen.add(node);
    if (Array.isArray(node)) {
      for (const n of node) visit(n);
      return;
    }
    if (!isZod(node)) {
      // A route config, a response, a content map: plain objects around the schemas.
      if (Object.getPrototypeOf(node) === Object.prototype) Object.values(node).forEach(visit);
      return;
    }
    const def = node._zod.def;
    const inner = def.innerType;
    const wrapped = WRAPPERS.has(String(def.type)) && isZod(inner) && getRefId(inner) === getRefId(node);
    if (getRefId(node) && !wrapped && !out.has(node)) out.set(node, where);
    if (def.type === "lazy" && typeof def.getter === "function") visit(def.getter());
    for (const value of Object.values(def)) {
      if (isZod(value) || Array.isArray(value)) visit(value);
      // An object's shape: a plain map of field schemas.
      else if (value && typeof value === "object" && Object.values(value).some(isZod)) visit(value);
    }
  };
  visit(root);
  return out;
}

/** Each component name met under more than one generated shape, with where each shape was met. */
function nameClashes(app: Pick<App, "openAPIRegistry">): string[] {
  const schemas = new Map<Zod, string>();
  for (const d of app.openAPIRegistry.definitions) {
    const where =
      d.type === "route"
        ? `${d.route.method.toUpperCase()} ${d.route.path}`
        : d.type === "webhook"
          ? `webhook ${d.webhook.path}`
          : d.type;
    namedSchemas(d, where, schemas);
  }
  const shapes = new Map<string, Map<string, string>>();
  for (const [schema, where] of schemas) {
    const name = getRefId(schema)!;
    // The component this schema alone generates (schemas it names inside stay references).
    const generated = new OpenApiGeneratorV31([{ type: "schema", schema }]).generateComponents();
    const shape = JSON.stringify(generated.components?.schemas?.[name]);
    const byShape = shapes.get(name) ?? new Map<string, string>();
    if (!byShape.has(shape)) byShape.set(shape, where);
    shapes.set(name, byShape);
  }
  return [...shapes]
    .filter(([, byShape]) => byShape.size > 1)
    .map(
      ([name, byShape]) => `${name}: ${byShape.size} different schemas (${[...byShape.values()].join("; ")})`,
    );
}

test("each component name of the document stands for one schema", () => {
  expect(nameClashes(ctx.app)).toEqual([]);
  const names = new Set(
    [...namedSchemas(ctx.app.openAPIRegistry.definitions, "app", new Map()).keys()].map((s) => getRefId(s)),
  );
  // The walk reaches schemas named deep inside others (a transcript's segments, a list's items).
  expect(names).toContain("TranscriptSegment");
  expect(names).toContain("DocumentReady");
  expect(names).toContain("CreatedDocument");
});

test("two different schemas registered under one name are found, wherever they are used", () => {
  const app = new OpenAPIHono();
  const first = z.object({ id: z.string() }).openapi("Thing");
  const second = z.object({ id: z.string(), size: z.number() }).openapi("Thing");
  const same = z.object({ id: z.string() }).openapi("Other");
  const sameAgain = z.object({ id: z.string() }).openapi("Other");
  for (const [path, schema] of [
    ["/a", first],
    ["/b", z.object({ items: z.array(second) })],
    ["/c", same],
    ["/d", sameAgain.optional()],
  ] as const) {
    const route = createRoute({
      method: "get",
      path,
      responses: { 200: { description: "ok", content: { "application/json": { schema } } } },
    });
    app.openapi(route, (c) => c.json({} as never, 200));
  }
  expect(nameClashes(app)).toEqual(["Thing: 2 different schemas (GET /a; GET /b)"]);
});
