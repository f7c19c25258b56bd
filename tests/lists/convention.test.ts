import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { defaultHook } from "../../src/app.ts";
import { ManualClock } from "../../src/clock.ts";
import { paginate } from "../../src/db/engine/pages.ts";
import { errorResponses, onError } from "../../src/errors.ts";
import type { AppEnv } from "../../src/http/appEnv.ts";
import { requestContext } from "../../src/http/requestId.ts";
import { requireSecretKey } from "../../src/http/secretKey.ts";
import {
  assertLivemodeMatches,
  listEnvelope,
  listQuery,
  livemodeParam,
  registerListConvention,
} from "../../src/lists/cursor.ts";
import { createContact } from "../../src/services/contacts.ts";
import { recordEvent } from "../../src/services/events.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";

/** The envelope, the order, `has_more`, the OpenAPI, and the `livemode` rules as calls and campaigns use them. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
// A clock that never advances: every item below has the same created_at.
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

async function walk(path: string, key: string, limit: number) {
  const pages: { data: { id: string; createdAt: string }[]; has_more: boolean }[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const sep = path.includes("?") ? "&" : "?";
    const res = await ctx.request(`${path}${sep}limit=${limit}${cursor ? `&starting_after=${cursor}` : ""}`, {
      key,
    });
    expect(res.status).toBe(200);
    const page = await res.json();
    pages.push(page);
    if (!page.has_more) break;
    cursor = page.data[page.data.length - 1].id;
  }
  return pages;
}

describe("order and has_more", () => {
  let created: string[];

  beforeAll(async () => {
    created = [];
    for (let i = 0; i < 23; i++) {
      const c = await createContact(
        ctx.deps,
        { organizationId: seed.org.id, livemode: true },
        { phone: `+3361234${String(i).padStart(4, "0")}` },
      );
      created.push(c.id);
    }
  });

  test("equal created_at: newest first by id, every page limit-sized until the last, no repeat, no skip", async () => {
    for (const limit of [1, 2, 3, 5, 7, 22, 23, 24, 100]) {
      const pages = await walk("/api/v1/contacts", seed.liveKey, limit);
      const ids = pages.flatMap((p) => p.data.map((c) => c.id));
      expect(ids).toEqual([...created].reverse());
      expect(new Set(pages.flatMap((p) => p.data.map((c) => c.createdAt)))).toEqual(
        new Set(["2026-11-21T09:30:00.000Z"]),
      );
      for (const p of pages.slice(0, -1)) {
        expect(p.has_more).toBe(true);
        expect(p.data.length).toBe(limit);
      }
      // Never an empty extra page: the last page holds the remainder.
      const last = pages[pages.length - 1]!;
      expect(last.has_more).toBe(false);
      expect(last.data.length).toBe(23 % limit === 0 ? Math.min(limit, 23) : 23 % limit);
    }
  });

  test("without limit a page holds 20 items", async () => {
    const res = await ctx.request("/api/v1/contacts", { key: seed.liveKey });
    const page = await res.json();
    expect(page.data.length).toBe(20);
    expect(page.has_more).toBe(true);
  });

  test("mixed timestamps: created_at first, then id", async () => {
    const later = new ManualClock("2026-11-21T09:30:00.001Z");
    const deps = { ...ctx.deps, clock: later };
    const a = await createContact(
      deps,
      { organizationId: seed.org.id, livemode: true },
      { phone: "+33700000001" },
    );
    const b = await createContact(
      deps,
      { organizationId: seed.org.id, livemode: true },
      { phone: "+33700000002" },
    );
    // A later created_at comes first; the ids only break ties.
    const res = await ctx.request("/api/v1/contacts?limit=3", { key: seed.liveKey });
    const ids = (await res.json()).data.map((c: { id: string }) => c.id);
    expect(ids).toEqual([b.id, a.id, created[created.length - 1]]);
    await ctx.deps.sql`delete from contacts where id in ${ctx.deps.sql([a.id, b.id])}`;
  });
});

describe("OpenAPI", () => {
  interface Schema {
    $ref?: string;
    required?: string[];
    description?: string;
    properties?: Record<string, Schema>;
  }
  interface Operation {
    parameters?: { name?: string; $ref?: string }[];
    responses: Record<string, { description: string; content?: Record<string, { schema: Schema }> }>;
  }
  let doc: {
    paths: Record<string, Record<string, Operation>>;
    components: { parameters: Record<string, { name: string; in: string }>; schemas: Record<string, Schema> };
  };
  const lists = ["/api/v1/contacts", "/api/v1/events", "/api/v1/webhook-endpoints", "/api/v1/campaigns"];

  beforeAll(async () => {
    doc = await (await ctx.request("/api/openapi.json")).json();
  });

  test("limit and starting_after are defined once, as parameter components", () => {
    expect(doc.components.parameters.Limit).toMatchObject({ name: "limit", in: "query" });
    expect(doc.components.parameters.StartingAfter).toMatchObject({ name: "starting_after", in: "query" });
    expect(doc.components.parameters.Livemode).toMatchObject({ name: "livemode", in: "query" });
    expect(doc.components.schemas.Limit).toMatchObject({
      type: "integer",
      minimum: 1,
      maximum: 100,
      default: 20,
    });
  });

  test("every list route refers to them and defines no inline copy", () => {
    for (const path of lists) {
      const params = doc.paths[path]!.get!.parameters ?? [];
      expect(params.slice(0, 2)).toEqual([
        { $ref: "#/components/parameters/Limit" },
        { $ref: "#/components/parameters/StartingAfter" },
      ]);
      expect(params.filter((p) => p.name === "limit" || p.name === "starting_after")).toEqual([]);
    }
    expect(doc.paths["/api/v1/events"]!.get!.parameters).toContainEqual({
      $ref: "#/components/parameters/Livemode",
    });
  });

  test("every list answers the same envelope shape, and documents invalid_query and invalid_cursor", () => {
    const shapes = lists.map((path) => {
      const get = doc.paths[path]!.get!;
      expect(get.responses["400"]!.description).toContain("invalid_query");
      expect(get.responses["400"]!.description).toContain("invalid_cursor");
      const ref = get.responses["200"]!.content!["application/json"]!.schema.$ref!;
      const schema = doc.components.schemas[ref.split("/").pop()!]!;
      return {
        required: schema.required,
        description: schema.description,
        has_more: schema.properties?.has_more,
        data: { ...schema.properties?.data, items: undefined },
      };
    });
    expect(shapes[1]).toEqual(shapes[0]!);
    expect(shapes[2]).toEqual(shapes[0]!);
  });
});

describe("livemode filter, as calls and campaigns use the helper", () => {
  // A list route built only from the helper's parts, over the events table (which has livemode).
  function livemodeApp() {
    const app = new OpenAPIHono<AppEnv>({ defaultHook });
    app.use("*", requestContext(ctx.deps));
    registerListConvention(app);
    const Item = z.object({ id: z.string() });
    const route = createRoute({
      method: "get",
      path: "/list",
      middleware: [requireSecretKey(ctx.deps, "events:read")] as const,
      request: { query: listQuery({ livemode: livemodeParam }) },
      responses: {
        200: {
          description: "page",
          content: { "application/json": { schema: listEnvelope(Item, "TestList") } },
        },
        ...errorResponses("invalid_query", "invalid_cursor"),
      },
    });
    app.openapi(route, async (c) => {
      const auth = c.get("auth");
      const q = c.req.valid("query");
      assertLivemodeMatches(q.livemode, auth.livemode);
      const sql = ctx.deps.sql;
      const page = await paginate<{ id: string }>({
        sql,
        table: "events",
        ranges: [
          {
            keys: [
              ["organization_id", auth.organizationId],
              ["livemode", auth.livemode],
            ],
          },
        ],
        prefix: "evt",
        limit: q.limit,
        startingAfter: q.starting_after,
        columns: sql`id`,
      });
      return c.json(page, 200);
    });
    app.onError(onError(ctx.deps.log));
    return app;
  }
  const get = (path: string, key: string) =>
    livemodeApp().request(path, { headers: { authorization: `Bearer ${key}` } });

  beforeAll(async () => {
    for (const livemode of [true, false]) {
      await recordEvent(ctx.deps.sql, ctx.deps, {
        organizationId: seed.org.id,
        agentId: null,
        type: "call.started",
        livemode,
        data: {},
      });
    }
  });

  test("the key's own mode is accepted and only that mode is listed", async () => {
    for (const [key, livemode] of [
      [seed.liveKey, "true"],
      [seed.testKey, "false"],
    ] as const) {
      for (const q of ["", `?livemode=${livemode}`]) {
        const res = await get(`/list${q}`, key);
        expect(res.status).toBe(200);
        const page = await res.json();
        expect(page.data.length).toBeGreaterThan(0);
        const modes = await ctx.deps.sql`select distinct livemode from events where id in ${ctx.deps.sql(
          page.data.map((e: { id: string }) => e.id),
        )}`;
        expect(modes.map((r) => r.livemode)).toEqual([livemode === "true"]);
      }
    }
  });

  test("the other mode is 400 invalid_query with param livemode", async () => {
    for (const [key, value] of [
      [seed.testKey, "true"],
      [seed.liveKey, "false"],
    ] as const) {
      const res = await get(`/list?livemode=${value}`, key);
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(body.error).toMatchObject({ code: "invalid_query", param: "livemode" });
    }
  });

  test("anything but exactly true or false, or a repeated value, is 400 invalid_query with param livemode", async () => {
    for (const q of ["TRUE", "1", "0", "yes", "", "false%20", "false&livemode=false"]) {
      const res = await get(`/list?livemode=${q}`, seed.testKey);
      expect(res.status).toBe(400);
      expect((await res.json()).error).toMatchObject({ code: "invalid_query", param: "livemode" });
    }
  });

  test("a cursor of the other mode is invalid_cursor", async () => {
    const [live] = await ctx.deps
      .sql`select id from events where organization_id = ${seed.org.id} and livemode`;
    const res = await get(`/list?starting_after=${live!.id}`, seed.testKey);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: "invalid_cursor", param: "starting_after" });
  });
});
