import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ErrorCode } from "../../src/errors.ts";
import { createContact, deleteContact } from "../../src/services/contacts.ts";
import { recordEvent } from "../../src/services/events.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createWebhookEndpoint } from "../../src/services/webhookEndpoints.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/** Every bad query of the list convention, on every list route that uses it. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;
const ids = {} as Record<string, string>;

const LISTS = [
  "/api/v1/contacts",
  "/api/v1/events",
  "/api/v1/webhook-endpoints",
  "/api/v1/campaigns",
] as const;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
  const actor = { organizationId: seed.org.id, livemode: false };
  ids.contact = (await createContact(ctx.deps, actor, { phone: "+33612345678" })).id;
  ids.contactOtherPhone = (await createContact(ctx.deps, actor, { phone: "+33699999999" })).id;
  ids.deletedContact = (await createContact(ctx.deps, actor, { phone: "+33612345678" })).id;
  await deleteContact(ctx.deps, actor, ids.deletedContact);
  ids.foreignContact = (
    await createContact(
      ctx.deps,
      { organizationId: other.org.id, livemode: false },
      { phone: "+33612345678" },
    )
  ).id;
  ids.liveEvent = await recordEvent(ctx.deps.sql, ctx.deps, {
    organizationId: seed.org.id,
    agentId: null,
    type: "call.started",
    livemode: true,
    data: { id: "call_x" },
  });
  const [testEvent] = await ctx.deps.sql<{ id: string }[]>`
    select id from events where organization_id = ${seed.org.id} and livemode = false
    and type = 'contact.created' order by created_at desc, id desc limit 1`;
  ids.testEvent = testEvent!.id;
  ids.foreignEvent = await recordEvent(ctx.deps.sql, ctx.deps, {
    organizationId: other.org.id,
    agentId: null,
    type: "contact.created",
    livemode: false,
    data: { id: "ct_x" },
  });
  ids.endpoint = (
    await createWebhookEndpoint(
      ctx.deps,
      { organizationId: seed.org.id, livemode: false },
      { url: "https://a.example.com/h" },
    )
  ).id;
  ids.liveEndpoint = (
    await createWebhookEndpoint(
      ctx.deps,
      { organizationId: seed.org.id, livemode: true },
      { url: "https://c.example.com/h" },
    )
  ).id;
  ids.foreignEndpoint = (
    await createWebhookEndpoint(
      ctx.deps,
      { organizationId: other.org.id, livemode: false },
      { url: "https://b.example.com/h" },
    )
  ).id;
});
afterAll(() => ctx.close());

/** GET `path` and check the refusal (see expectApiError). */
async function refused(path: string, status: number, code: ErrorCode, param: string, key = seed.testKey) {
  return expectApiError(await ctx.request(path, { key }), status, code, { param, label: path });
}

describe("limit", () => {
  const bad = ["0", "101", "abc", "1.5", "-1", "", "+5", " 5", "1e1", "0x10", "99999999999999999999", "5;"];
  for (const list of LISTS) {
    test(`${list}: out of range or not an integer is 400 invalid_query with param limit`, async () => {
      for (const v of bad)
        await refused(`${list}?limit=${encodeURIComponent(v)}`, 400, "invalid_query", "limit");
      await refused(`${list}?limit`, 400, "invalid_query", "limit");
    });
    test(`${list}: a repeated limit is 400 invalid_query`, async () => {
      const body = await refused(`${list}?limit=1&limit=1`, 400, "invalid_query", "limit");
      expect(body.error.message).toContain("once");
    });
    test(`${list}: 1, 100 and the default 20 are accepted`, async () => {
      for (const v of ["1", "100", "020"]) {
        const res = await ctx.request(`${list}?limit=${v}`, { key: seed.testKey });
        expect(res.status).toBe(200);
        expect(Object.keys(await res.json()).sort()).toEqual(["data", "has_more"]);
      }
    });
  }
});

describe("starting_after, malformed: 400 invalid_query", () => {
  const malformed = [
    "",
    "x".repeat(300),
    `ct_${"0".repeat(300)}`,
    "foo_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
    "ct",
    "ct_",
    "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0",
    "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0CD",
    "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0I",
    "ct_01jd8y3m6w9q2t4v5x7z8a9b0c",
    "CT_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
    "' OR '1'='1",
    "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C'; drop table contacts; --",
    "ct_01JD8Y3M6W9Q2T4V5X7Z8A9%",
    "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C\u0000",
    " ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
  ];
  for (const list of LISTS) {
    test(`${list}: empty, too long, wrong prefix, wrong length, SQL metacharacters`, async () => {
      for (const v of malformed) {
        await refused(
          `${list}?starting_after=${encodeURIComponent(v)}`,
          400,
          "invalid_query",
          "starting_after",
        );
      }
      await refused(`${list}?starting_after`, 400, "invalid_query", "starting_after");
    });
    test(`${list}: a repeated starting_after is 400 invalid_query`, async () => {
      const body = await refused(
        `${list}?starting_after=${ids.contact}&starting_after=${ids.contact}`,
        400,
        "invalid_query",
        "starting_after",
      );
      expect(body.error.message).toContain("once");
    });
  }

  test("the tables survive the SQL metacharacters", async () => {
    const [row] = await ctx.deps.sql`select count(*)::int as n from contacts`;
    expect(row!.n).toBeGreaterThan(0);
  });
});

describe("unknown parameters: 400 invalid_query naming the parameter", () => {
  const unknown: [string, string][] = [
    ["/api/v1/contacts", "foo=bar"],
    ["/api/v1/contacts", "livemode=false"],
    ["/api/v1/contacts", "Limit=5"],
    ["/api/v1/contacts", "limit[]=5"],
    ["/api/v1/contacts", "ending_before=ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
    ["/api/v1/webhook-endpoints", "livemode=false"],
    ["/api/v1/events", "status=completed"],
    ["/api/v1/webhook-endpoints", "type=contact.created"],
    ["/api/v1/webhook-endpoints", "url=https://a.example.com/h"],
  ];
  for (const [list, query] of unknown) {
    test(`${list}?${query}`, async () => {
      const name = query.split("=")[0]!;
      await refused(`${list}?${query}`, 400, "invalid_query", name);
    });
  }

  test("repeated filters and filters with bad values", async () => {
    await refused("/api/v1/events?type=call.started&type=call.ended", 400, "invalid_query", "type");
    await refused("/api/v1/events?type=call.nope", 400, "invalid_query", "type");
    await refused("/api/v1/events?type=", 400, "invalid_query", "type");
    await refused("/api/v1/contacts?phone=0612345678", 400, "invalid_query", "phone");
    await refused("/api/v1/contacts?phone=%2B1&phone=%2B2", 400, "invalid_query", "phone");
    await refused("/api/v1/contacts?email=", 400, "invalid_query", "email");
    await refused(`/api/v1/contacts?email=${"a".repeat(300)}`, 400, "invalid_query", "email");
  });
});

describe("starting_after outside the list: 400 invalid_cursor, never an empty page", () => {
  const wellFormedUnknown = "01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
  const cases: [string, () => string, string?][] = [
    ["/api/v1/contacts", () => `ct_${wellFormedUnknown}`, "unknown"],
    ["/api/v1/contacts", () => ids.deletedContact!, "deleted"],
    ["/api/v1/contacts", () => ids.foreignContact!, "of another organization"],
    ["/api/v1/contacts", () => ids.testEvent!, "of another resource type (event)"],
    ["/api/v1/contacts", () => seed.agent.id, "of another resource type (agent)"],
    ["/api/v1/contacts", () => seed.org.id, "of another resource type (organization)"],
    ["/api/v1/contacts", () => `call_${wellFormedUnknown}`, "of another resource type (call)"],
    ["/api/v1/events", () => `evt_${wellFormedUnknown}`, "unknown"],
    ["/api/v1/events", () => ids.liveEvent!, "of the other mode"],
    ["/api/v1/events", () => ids.foreignEvent!, "of another organization"],
    ["/api/v1/events", () => ids.contact!, "of another resource type"],
    ["/api/v1/webhook-endpoints", () => `we_${wellFormedUnknown}`, "unknown"],
    ["/api/v1/webhook-endpoints", () => ids.foreignEndpoint!, "of another organization"],
    ["/api/v1/webhook-endpoints", () => ids.liveEndpoint!, "of the other mode"],
    ["/api/v1/webhook-endpoints", () => ids.contact!, "of another resource type"],
  ];
  for (const [list, cursor, why] of cases) {
    test(`${list}: ${why}`, async () => {
      await refused(`${list}?starting_after=${cursor()}`, 400, "invalid_cursor", "starting_after");
    });
  }

  test("outside the current filters", async () => {
    await refused(
      `/api/v1/contacts?phone=%2B33612345678&starting_after=${ids.contactOtherPhone}`,
      400,
      "invalid_cursor",
      "starting_after",
    );
    await refused(
      `/api/v1/events?type=contact.deleted&starting_after=${ids.testEvent}`,
      400,
      "invalid_cursor",
      "starting_after",
    );
    // The same cursors are fine in the list they came from.
    const ok = await ctx.request(`/api/v1/contacts?starting_after=${ids.contactOtherPhone}`, {
      key: seed.testKey,
    });
    expect(ok.status).toBe(200);
    const okEvents = await ctx.request(
      `/api/v1/events?type=contact.created&starting_after=${ids.testEvent}`,
      {
        key: seed.testKey,
      },
    );
    expect(okEvents.status).toBe(200);
  });

  test("a live key gets the live event as a cursor and refuses the test one", async () => {
    const live = await ctx.request(`/api/v1/events?starting_after=${ids.liveEvent}`, { key: seed.liveKey });
    expect(live.status).toBe(200);
    await refused(
      `/api/v1/events?starting_after=${ids.testEvent}`,
      400,
      "invalid_cursor",
      "starting_after",
      seed.liveKey,
    );
  });

  test("the last item of the list is a valid cursor: an empty last page, has_more false", async () => {
    const res = await ctx.request("/api/v1/contacts?limit=100", { key: seed.testKey });
    const all = (await res.json()).data;
    const last = all[all.length - 1].id;
    const after = await ctx.request(`/api/v1/contacts?starting_after=${last}`, { key: seed.testKey });
    expect(after.status).toBe(200);
    expect(await after.json()).toEqual({ data: [], has_more: false });
  });
});

describe("order of checks", () => {
  test("the key is checked before the query: no key and a bad limit is 401", async () => {
    const res = await ctx.request("/api/v1/contacts?limit=0");
    await expectApiError(res, 401, "invalid_key");
  });

  test("the scope is checked before the query: 403 missing_scope", async () => {
    const k = await createSecretKey(ctx.deps, seed.org.id, { mode: "test", scopes: ["calls:read"] });
    for (const list of LISTS) {
      const res = await ctx.request(`${list}?limit=0`, { key: k.key });
      await expectApiError(res, 403, "missing_scope");
    }
  });
});
