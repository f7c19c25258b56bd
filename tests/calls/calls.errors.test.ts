import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ErrorCode } from "../../src/errors.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { insertContact, writeCounts } from "./support.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;
let contactId: string;
let testCallId: string;

beforeAll(async () => {
  // No runner: the calls stay `initiated`, which is all these tests need.
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
  contactId = await insertContact(ctx.deps, seed.org.id);
  const res = await ctx.request("/api/v1/calls", {
    method: "POST",
    key: seed.testKey,
    json: { agentId: seed.agent.id, to: "+33612345678", contactId },
  });
  expect(res.status).toBe(201);
  testCallId = (await res.json()).id;
});
afterAll(() => ctx.close());

const post = (key: string, json: unknown, init: RequestInit = {}) =>
  ctx.request("/api/v1/calls", { method: "POST", key, json, ...init });

describe("POST /v1/calls bad input writes nothing", () => {
  const cases: [string, () => unknown, number, ErrorCode, string | undefined][] = [
    ["`to` not E.164", () => ({ agentId: seed.agent.id, to: "0612345678" }), 400, "invalid_request", "to"],
    [
      "`to` of no country calling code",
      () => ({ agentId: seed.agent.id, to: "+999123456789" }),
      400,
      "invalid_request",
      "to",
    ],
    ["`to` missing", () => ({ agentId: seed.agent.id }), 400, "invalid_request", "to"],
    ["`to` a number", () => ({ agentId: seed.agent.id, to: 33612345678 }), 400, "invalid_request", "to"],
    ["`agentId` missing", () => ({ to: "+33612345678" }), 400, "invalid_request", "agentId"],
    [
      "`agentId` of wrong type",
      () => ({ agentId: 12, to: "+33612345678" }),
      400,
      "invalid_request",
      "agentId",
    ],
    ["`agentId` malformed", () => ({ agentId: "nope", to: "+33612345678" }), 404, "not_found", "agentId"],
    [
      "`agentId` unknown",
      () => ({ agentId: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", to: "+33612345678" }),
      404,
      "not_found",
      "agentId",
    ],
    [
      "`agentId` of another organization",
      () => ({ agentId: other.agent.id, to: "+33612345678" }),
      404,
      "not_found",
      "agentId",
    ],
    [
      "`variables` not flat",
      () => ({ agentId: seed.agent.id, to: "+33612345678", variables: { a: { b: 1 } } }),
      400,
      "invalid_request",
      "variables.a",
    ],
    [
      "`variables` holding an array",
      () => ({ agentId: seed.agent.id, to: "+33612345678", variables: { a: [1] } }),
      400,
      "invalid_request",
      "variables.a",
    ],
    [
      "`variables` not an object",
      () => ({ agentId: seed.agent.id, to: "+33612345678", variables: "x" }),
      400,
      "invalid_request",
      "variables",
    ],
    [
      "`variables` with too many keys",
      () => ({
        agentId: seed.agent.id,
        to: "+33612345678",
        variables: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])),
      }),
      400,
      "invalid_request",
      "variables",
    ],
    [
      "`variables` value too long",
      () => ({ agentId: seed.agent.id, to: "+33612345678", variables: { a: "x".repeat(1001) } }),
      400,
      "invalid_request",
      "variables.a",
    ],
    [
      "`runAt` not a timestamp",
      () => ({ agentId: seed.agent.id, to: "+33612345678", runAt: "tomorrow" }),
      400,
      "invalid_request",
      "runAt",
    ],
    [
      "unknown field",
      () => ({ agentId: seed.agent.id, to: "+33612345678", priority: 1 }),
      400,
      "invalid_request",
      "priority",
    ],
    [
      "`contactId` unknown",
      () => ({ agentId: seed.agent.id, to: "+33612345678", contactId: "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
      404,
      "not_found",
      "contactId",
    ],
    [
      "`contactId` malformed",
      () => ({ agentId: seed.agent.id, to: "+33612345678", contactId: "bob" }),
      404,
      "not_found",
      "contactId",
    ],
  ];
  for (const [name, body, status, code, param] of cases) {
    test(`${name}: ${status} ${code}`, async () => {
      const before = await writeCounts(ctx.deps.sql);
      await expectApiError(await post(seed.testKey, body()), status, code, { param });
      expect(await writeCounts(ctx.deps.sql)).toEqual(before);
    });
  }

  test("a contact of another organization is 404 not_found", async () => {
    const foreign = await insertContact(ctx.deps, other.org.id);
    const res = await post(seed.testKey, { agentId: seed.agent.id, to: "+33612345678", contactId: foreign });
    await expectApiError(res, 404, "not_found", { param: "contactId" });
  });

  test("not JSON, no content type: 400 / 415, nothing written", async () => {
    const before = await writeCounts(ctx.deps.sql);
    const bad = await ctx.request("/api/v1/calls", {
      method: "POST",
      key: seed.testKey,
      headers: { "content-type": "application/json" },
      body: "{nope",
    });
    await expectApiError(bad, 400, "invalid_request");
    const untyped = await ctx.request("/api/v1/calls", { method: "POST", key: seed.testKey, body: "{}" });
    expect(untyped.status).toBe(415);
    expect(await writeCounts(ctx.deps.sql)).toEqual(before);
  });

  test("a key restricted to other agents is 403 agent_not_allowed", async () => {
    const c = ctx.deps;
    const sales = await createAgent(c, seed.org.id, { name: "Sales" });
    const restricted = await createSecretKey(c, seed.org.id, {
      mode: "test",
      scopes: ["calls:write", "calls:read"],
      agentIds: [sales.id],
    });
    const res = await post(restricted.key, { agentId: seed.agent.id, to: "+33612345678" });
    await expectApiError(res, 403, "agent_not_allowed", { param: "agentId" });
    // …and it does not see the calls of the other agents either.
    const list = await (await ctx.request("/api/v1/calls", { key: restricted.key })).json();
    expect(list.data).toEqual([]);
    const one = await ctx.request(`/api/v1/calls/${testCallId}`, { key: restricted.key });
    expect(one.status).toBe(404);
  });

  test("scopes: calls:write to create, calls:read to read", async () => {
    const c = ctx.deps;
    const reader = await createSecretKey(c, seed.org.id, { mode: "test", scopes: ["calls:read"] });
    const writer = await createSecretKey(c, seed.org.id, { mode: "test", scopes: ["calls:write"] });
    const res = await post(reader.key, { agentId: seed.agent.id, to: "+33612345678" });
    await expectApiError(res, 403, "missing_scope");
    for (const path of [
      "/api/v1/calls",
      `/api/v1/calls/${testCallId}`,
      `/api/v1/calls/${testCallId}/transcript`,
    ]) {
      const r = await ctx.request(path, { key: writer.key });
      await expectApiError(r, 403, "missing_scope");
    }
    const none = await post("", { agentId: seed.agent.id, to: "+33612345678" });
    expect(none.status).toBe(401);
  });

  test("a test call ignores a past or future runAt and keeps its contact", async () => {
    const res = await post(seed.testKey, {
      agentId: seed.agent.id,
      to: "+33612345678",
      contactId,
      runAt: "2030-01-01T00:00:00.000Z",
    });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ status: "initiated", livemode: false, contactId });
  });

  test("an inactive agent is 503 agent_unavailable", async () => {
    await ctx.deps.sql`update agents set active = false where id = ${other.agent.id}`;
    const res = await post(other.testKey, { agentId: other.agent.id, to: "+33612345678" });
    await expectApiError(res, 503, "agent_unavailable", { param: "agentId" });
    await ctx.deps.sql`update agents set active = true where id = ${other.agent.id}`;
  });
});

describe("mode isolation", () => {
  test("a test call is 404 for a live key (call and transcript), and for another organization", async () => {
    for (const key of [seed.liveKey, other.testKey]) {
      for (const path of [`/api/v1/calls/${testCallId}`, `/api/v1/calls/${testCallId}/transcript`]) {
        const res = await ctx.request(path, { key });
        await expectApiError(res, 404, "not_found");
      }
    }
    const own = await ctx.request(`/api/v1/calls/${testCallId}`, { key: seed.testKey });
    expect(own.status).toBe(200);
  });

  test("malformed and unknown ids are 404 not_found", async () => {
    for (const id of ["nope", "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"]) {
      const res = await ctx.request(`/api/v1/calls/${id}`, { key: seed.testKey });
      await expectApiError(res, 404, "not_found");
    }
  });

  test("lists show only the key's mode; a livemode that contradicts the key is 400 invalid_query", async () => {
    const test = await (await ctx.request("/api/v1/calls", { key: seed.testKey })).json();
    expect(test.data.length).toBeGreaterThan(0);
    expect(test.data.every((c: { livemode: boolean }) => c.livemode === false)).toBe(true);
    const live = await (await ctx.request("/api/v1/calls", { key: seed.liveKey })).json();
    expect(live).toEqual({ data: [], has_more: false });
    const ok = await ctx.request("/api/v1/calls?livemode=false", { key: seed.testKey });
    expect(ok.status).toBe(200);
    for (const [key, q] of [
      [seed.testKey, "livemode=true"],
      [seed.liveKey, "livemode=false"],
      [seed.testKey, "livemode=yes"],
      [seed.testKey, "limit=0"],
      [seed.testKey, "limit=101"],
      [seed.testKey, "status=done"],
      [seed.testKey, "starting_after=garbage"],
      // An empty filter is a mistake, not "no filter": answered like an empty `limit=`.
      [seed.testKey, "agentId="],
      [seed.testKey, "campaignId="],
      [seed.testKey, "status="],
      // A filter id that cannot be one: answered like a malformed cursor, not with an empty list.
      [seed.testKey, "agentId=garbage"],
      [seed.testKey, "agentId=-1"],
      [seed.testKey, "campaignId=agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
    ] as const) {
      const res = await ctx.request(`/api/v1/calls?${q}`, { key });
      await expectApiError(res, 400, "invalid_query", { param: q.split("=")[0], label: q });
    }
  });

  test("pagination walks every call newest first; a cursor of another list is invalid_cursor", async () => {
    for (let i = 0; i < 5; i++) await post(seed.testKey, { agentId: seed.agent.id, to: "+33612345678" });
    const all: string[] = [];
    let after: string | undefined;
    for (;;) {
      const res = await ctx.request(`/api/v1/calls?limit=2${after ? `&starting_after=${after}` : ""}`, {
        key: seed.testKey,
      });
      const page = await res.json();
      all.push(...page.data.map((c: { id: string }) => c.id));
      if (!page.has_more) break;
      after = page.data.at(-1).id;
    }
    const [{ n }] = (await ctx.deps.sql`
      select count(*)::int as n from calls where organization_id = ${seed.org.id} and livemode = false`) as unknown as [
      { n: number },
    ];
    expect(all.length).toBe(n);
    expect([...all].sort().reverse()).toEqual(all);
    const foreign = await ctx.request(`/api/v1/calls?starting_after=${testCallId}`, { key: other.testKey });
    await expectApiError(foreign, 400, "invalid_cursor", { param: "starting_after" });
    const filtered = await ctx.request(`/api/v1/calls?status=completed&starting_after=${testCallId}`, {
      key: seed.testKey,
    });
    await expectApiError(filtered, 400, "invalid_cursor", { param: "starting_after" });
    const byStatus = await (
      await ctx.request("/api/v1/calls?status=initiated&limit=100", { key: seed.testKey })
    ).json();
    expect(byStatus.data.length).toBe(n);
    const byAgent = await (
      await ctx.request(`/api/v1/calls?agentId=${other.agent.id}`, { key: seed.testKey })
    ).json();
    expect(byAgent.data).toEqual([]);
  });

  test("simulated calls count nowhere in usage: no live call, no plan minute touched", async () => {
    const [org] = await ctx.deps.sql<{ plan_minutes: number }[]>`
      select plan_minutes from organizations where id = ${seed.org.id}`;
    expect(org!.plan_minutes).toBe(1000);
    const [{ n }] = (await ctx.deps.sql`select count(*)::int as n from calls where livemode`) as unknown as [
      { n: number },
    ];
    expect(n).toBe(0);
  });
});
