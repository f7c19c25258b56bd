import { afterAll, describe, expect, test } from "bun:test";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { liveKitEvents } from "../helpers/fakeLivekit.ts";
import { mintToken, seedOrganization, startCall, startWorld } from "../webcalls/support.ts";

/**
 * Flat objects (call and session `variables`, contact `metadata`, campaign contacts' `variables`, a
 * live call's reported `collectedData`) keep every key exactly as sent, or are refused: a key an object
 * cannot hold as its own (`__proto__`) is 400 `invalid_request` naming it, never silently dropped; keys
 * named like Object's members are kept. Each route that takes one is tried, and what was stored is read
 * back from the database.
 */

// A fake media server, for the live calls whose results carry `collectedData`.
const world = await startWorld();
const ctx = world.ctx;
afterAll(() => world.close());
const seed = await seedOrganization(ctx, { planMinutes: 100_000, cap: 100_000 });
const sql = ctx.deps.sql;

/** A live web call its visitor joined (`ongoing`): the results of each can be reported once. */
async function ongoingCall(): Promise<string> {
  const res = await startCall(ctx, { sessionToken: await mintToken(ctx, seed.liveKey, seed.agent.id) });
  expect(res.status).toBe(201);
  const { callId } = await res.json();
  const { body, headers } = await world.liveKit.signWebhook(
    liveKitEvents.participantJoined(callId, `visitor-${callId}`),
  );
  expect((await ctx.request("/api/livekit/webhook", { method: "POST", body, headers })).status).toBe(200);
  return callId;
}

const contact = await (
  await ctx.request("/api/v1/contacts", {
    method: "POST",
    key: seed.testKey,
    json: { phone: "+33612345670" },
  })
).json();

interface FlatRoute {
  name: string;
  /** Sends the flat object in its place; answers the response. */
  send(flat: unknown): Promise<Response>;
  /** Where the flat object sits in the body, as `param` names it. */
  param: string;
  /** The flat object stored by a 201/200 answer. */
  stored(res: Response): Promise<unknown>;
}

const post = (path: string, json: unknown, method = "POST") =>
  ctx.request(path, { method, key: seed.testKey, json });

const routes: FlatRoute[] = [
  {
    name: "POST /api/v1/calls variables",
    send: (variables) => post("/api/v1/calls", { agentId: seed.agent.id, to: "+33612345678", variables }),
    param: "variables",
    stored: async (res) => {
      const { id } = await res.json();
      return (await sql`select variables from calls where id = ${id}`)[0]!.variables;
    },
  },
  {
    name: "POST /api/v1/web-call-sessions variables",
    send: (variables) => post("/api/v1/web-call-sessions", { agentId: seed.agent.id, variables }),
    param: "variables",
    stored: async () =>
      (await sql`select variables from session_tokens order by expires_at desc limit 1`)[0]!.variables,
  },
  {
    name: "POST /api/v1/contacts metadata",
    send: (metadata) => post("/api/v1/contacts", { phone: "+33612345671", metadata }),
    param: "metadata",
    stored: async (res) => (await res.json()).metadata,
  },
  {
    name: "PATCH /api/v1/contacts/{id} metadata",
    send: (metadata) => post(`/api/v1/contacts/${contact.id}`, { metadata }, "PATCH"),
    param: "metadata",
    stored: async (res) => (await res.json()).metadata,
  },
  {
    name: "POST /api/v1/campaigns contacts[].variables",
    send: (variables) =>
      post("/api/v1/campaigns", {
        name: "Flat",
        agentId: seed.agent.id,
        contacts: [{ phone: "+33612345672" }, { phone: "+33612345673", variables }],
      }),
    param: "contacts.1.variables",
    stored: async (res) => {
      const { id } = await res.json();
      return (
        await sql`select variables from campaign_contacts where campaign_id = ${id} and position = 1`
      )[0]!.variables;
    },
  },
  {
    name: "POST /api/v1/calls/{id}/results collectedData",
    send: async (collectedData) =>
      ctx.request(`/api/v1/calls/${await ongoingCall()}/results`, {
        method: "POST",
        key: seed.liveKey,
        json: { collectedData },
      }),
    param: "collectedData",
    stored: async (res) => {
      const { id } = await res.json();
      return (await sql`select collected_data from calls where id = ${id}`)[0]!.collected_data;
    },
  },
];

/** A body whose flat object holds `__proto__` as an own key, as JSON.parse reads it on the server. */
const withProto = (value: string, rest = '"a":1') => JSON.parse(`{${rest},"__proto__":${value}}`);

describe.each(routes.map((r) => [r.name, r] as const))("%s", (_name, r) => {
  test.each([
    ["an object", '{"x":1}'],
    ["a string", '"kept?"'],
    ["null", "null"],
    ["a number", "1"],
  ])("a `__proto__` key holding %s is 400 invalid_request naming it", async (_what, value) => {
    const flat = withProto(value);
    expect(Object.keys(flat)).toContain("__proto__");
    const res = await r.send(flat);
    await expectApiError(res, 400, "invalid_request", { param: `${r.param}.__proto__` });
  });

  test("keys named like Object's members are kept exactly, values and all", async () => {
    const flat = {
      constructor: "c",
      prototype: 1,
      toString: true,
      hasOwnProperty: null,
      valueOf: "v",
      __defineGetter__: "g",
      isPrototypeOf: 2.5,
    };
    const res = await r.send(flat);
    expect([200, 201]).toContain(res.status);
    expect(await r.stored(res)).toEqual(flat);
  });

  test("a value that is not flat under such a key is 400 naming it", async () => {
    for (const key of ["constructor", "prototype", "toString"]) {
      const res = await r.send({ [key]: { x: 1 } });
      const text = await res.clone().text();
      expect(await outcomeOf(res)).toBe("400 invalid_request");
      expect(JSON.parse(text).error.param).toBe(`${r.param}.${key}`);
    }
  });
});

describe("the OpenAPI document states the rules of every flat object a request body takes", () => {
  test("at most 50 keys of 1–64 characters; values string (≤ 1,000), number, boolean or null", async () => {
    type Schema = Record<string, unknown>;
    const doc = (await (await ctx.request("/api/openapi.json")).json()) as Schema;
    const components = (doc.components as { schemas: Record<string, Schema> }).schemas;
    const resolve = (s: Schema): Schema =>
      typeof s.$ref === "string" ? resolve(components[s.$ref.split("/").at(-1)!]!) : s;
    /** The flat objects (`variables`, `metadata`, `collectedData`) under a schema, by where they are. */
    const found: [string, Schema][] = [];
    const walk = (s: Schema, at: string, seen: Set<Schema>) => {
      const r = resolve(s);
      if (seen.has(r)) return;
      seen.add(r);
      for (const [name, p] of Object.entries((r.properties ?? {}) as Record<string, Schema>)) {
        if (["variables", "metadata", "collectedData"].includes(name))
          found.push([`${at}.${name}`, resolve(p)]);
        else walk(p, `${at}.${name}`, seen);
      }
      if (r.items) walk(r.items as Schema, `${at}[]`, seen);
    };
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Schema>>)) {
      for (const [method, op] of Object.entries(item)) {
        const body = (op.requestBody as Schema | undefined)?.content as
          | Record<string, { schema: Schema }>
          | undefined;
        if (body?.["application/json"]) walk(body["application/json"].schema, `${method} ${path}`, new Set());
      }
    }
    expect(found.map(([at]) => at)).toEqual(
      expect.arrayContaining([
        "post /api/v1/web-call-sessions.variables",
        "post /api/v1/calls.variables",
        "post /api/v1/contacts.metadata",
        "post /api/v1/campaigns.contacts[].variables",
        "post /api/v1/calls/{id}/results.collectedData",
      ]),
    );
    for (const [at, s] of found) {
      expect({ at, ...s }).toMatchObject({
        at,
        maxProperties: 50,
        propertyNames: { minLength: 1, maxLength: 64 },
        additionalProperties: {
          anyOf: [
            { type: "string", maxLength: 1000 },
            { type: "number" },
            { type: "boolean" },
            { type: "null" },
          ],
        },
      });
    }
  });
});
