import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/** Contacts: the resource, its events, both modes, and concurrent writes. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

const ID = /^ct_[0-9A-HJKMNP-TV-Z]{26}$/;

async function post(json: unknown, key = seed.testKey) {
  return ctx.request("/api/v1/contacts", { method: "POST", key, json });
}
async function patch(id: string, json: unknown, key = seed.testKey) {
  return ctx.request(`/api/v1/contacts/${id}`, { method: "PATCH", key, json });
}
async function eventsOf(contactId: string) {
  return ctx.deps.sql<{ id: string; type: string; livemode: boolean; data: Record<string, unknown> }[]>`
    select id, type, livemode, data from events where data->>'id' = ${contactId} order by created_at, id`;
}

describe("create, read, list", () => {
  test("POST with only a phone: 201 with every field, nulls and an empty metadata", async () => {
    const res = await post({ phone: "+33612345678" });
    expect(res.status).toBe(201);
    const c = await res.json();
    expect(c).toEqual({
      id: expect.stringMatching(ID),
      phone: "+33612345678",
      name: null,
      email: null,
      metadata: {},
      createdAt: "2026-11-21T09:30:00.000Z",
      updatedAt: "2026-11-21T09:30:00.000Z",
    });
  });

  test("POST with every field; GET returns the same object; the list has it first", async () => {
    const input = {
      phone: "+14155550123",
      name: "Jeanne Martin",
      email: "jeanne@example.com",
      metadata: { customerId: "A-1042", vip: true, score: 4.5, note: null },
    };
    const res = await post(input);
    expect(res.status).toBe(201);
    const c = await res.json();
    expect(c).toMatchObject(input);
    const got = await ctx.request(`/api/v1/contacts/${c.id}`, { key: seed.testKey });
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(c);
    const list = await (await ctx.request("/api/v1/contacts?limit=1", { key: seed.testKey })).json();
    expect(list).toEqual({ data: [c], has_more: true });
  });

  test("contacts are real in both modes: written with a test key, read with a live key and back", async () => {
    const c = await (await post({ phone: "+33611111111" }, seed.testKey)).json();
    const live = await ctx.request(`/api/v1/contacts/${c.id}`, { key: seed.liveKey });
    expect(live.status).toBe(200);
    const d = await (await post({ phone: "+33622222222" }, seed.liveKey)).json();
    const test = await ctx.request(`/api/v1/contacts/${d.id}`, { key: seed.testKey });
    expect(test.status).toBe(200);
    const both = async (key: string) =>
      (await (await ctx.request("/api/v1/contacts?limit=100", { key })).json()).data.map(
        (x: { id: string }) => x.id,
      );
    expect(await both(seed.liveKey)).toEqual(await both(seed.testKey));
  });

  test("the list filters by phone and, case-insensitively, by email", async () => {
    const a = await (await post({ phone: "+33633333333", email: "Some.One@Example.com" })).json();
    const b = await (await post({ phone: "+33633333333" })).json();
    const byPhone = await (
      await ctx.request("/api/v1/contacts?phone=%2B33633333333", { key: seed.testKey })
    ).json();
    expect(byPhone.data.map((x: { id: string }) => x.id)).toEqual([b.id, a.id]);
    const byEmail = await (
      await ctx.request("/api/v1/contacts?email=some.one%40example.COM", { key: seed.testKey })
    ).json();
    expect(byEmail.data.map((x: { id: string }) => x.id)).toEqual([a.id]);
  });
});

describe("update", () => {
  test("PATCH changes only the fields sent and moves updatedAt", async () => {
    const c = await (
      await post({ phone: "+33644444444", name: "A", email: "a@example.com", metadata: { k: 1 } })
    ).json();
    clock.advance(1500);
    const res = await patch(c.id, { name: "B" });
    expect(res.status).toBe(200);
    const u = await res.json();
    expect(u).toEqual({ ...c, name: "B", updatedAt: "2026-11-21T09:30:01.500Z" });
  });

  test("explicit null clears name and email and empties metadata; metadata is replaced as a whole", async () => {
    const c = await (
      await post({ phone: "+33655555555", name: "A", email: "a@example.com", metadata: { k: 1, j: 2 } })
    ).json();
    const replaced = await (await patch(c.id, { metadata: { z: "x" } })).json();
    expect(replaced.metadata).toEqual({ z: "x" });
    const cleared = await (await patch(c.id, { name: null, email: null, metadata: null })).json();
    expect(cleared).toMatchObject({ name: null, email: null, metadata: {}, phone: "+33655555555" });
    const phone = await (await patch(c.id, { phone: "+33655555556" })).json();
    expect(phone.phone).toBe("+33655555556");
  });

  test("a PATCH that changes nothing answers the contact and emits no event", async () => {
    const c = await (await post({ phone: "+33666666666", name: "Same", metadata: { a: 1, b: "x" } })).json();
    clock.advance(10);
    for (const body of [{}, { name: "Same" }, { metadata: { b: "x", a: 1 } }]) {
      const res = await patch(c.id, body);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(c);
    }
    expect((await eventsOf(c.id)).map((e) => e.type)).toEqual(["contact.created"]);
  });
});

describe("delete", () => {
  test("DELETE answers {id, deleted: true}; the contact is then gone from reads, lists and cursors", async () => {
    const c = await (await post({ phone: "+33677777777" })).json();
    const res = await ctx.request(`/api/v1/contacts/${c.id}`, { method: "DELETE", key: seed.testKey });
    expect(res.status).toBe(200);
    const deleted = await res.json();
    expect(deleted).toEqual({ id: c.id, deleted: true, updatedAt: expect.any(String) });
    // The deletion's time, after the contact's last change.
    expect(Date.parse(deleted.updatedAt)).toBeGreaterThan(Date.parse(c.updatedAt));
    for (const [method, json] of [
      ["GET", undefined],
      ["PATCH", { name: "x" }],
      ["DELETE", undefined],
    ] as const) {
      const again = await ctx.request(`/api/v1/contacts/${c.id}`, { method, key: seed.liveKey, json });
      await expectApiError(again, 404, "not_found");
    }
    const list = await (await ctx.request("/api/v1/contacts?limit=100", { key: seed.testKey })).json();
    expect(list.data.map((x: { id: string }) => x.id)).not.toContain(c.id);
    const cursor = await ctx.request(`/api/v1/contacts?starting_after=${c.id}`, { key: seed.testKey });
    expect(cursor.status).toBe(400);
    expect((await cursor.json()).error).toMatchObject({ code: "invalid_cursor", param: "starting_after" });
  });
});

describe("events", () => {
  test("every write emits its event, livemode false with a test key although the write is real", async () => {
    const c = await (await post({ phone: "+33688888888", name: "T" }, seed.testKey)).json();
    const u = await (await patch(c.id, { name: "U" }, seed.testKey)).json();
    const del = await ctx.request(`/api/v1/contacts/${c.id}`, { method: "DELETE", key: seed.testKey });
    const deleted = await del.json();
    const events = await eventsOf(c.id);
    expect(events.map((e) => [e.type, e.livemode])).toEqual([
      ["contact.created", false],
      ["contact.updated", false],
      ["contact.deleted", false],
    ]);
    expect(events[0]!.data).toEqual(c);
    expect(events[1]!.data).toEqual(u);
    expect(events[2]!.data).toEqual(deleted);
    expect(Object.keys(deleted).sort()).toEqual(["deleted", "id", "updatedAt"]);
    // The test key reads them in GET /v1/events; the live key does not.
    const testList = await (await ctx.request("/api/v1/events?limit=3", { key: seed.testKey })).json();
    expect(testList.data.map((e: { id: string }) => e.id)).toEqual(events.map((e) => e.id).reverse());
    expect(testList.data[2]).toEqual({
      id: events[0]!.id,
      type: "contact.created",
      livemode: false,
      createdAt: expect.any(String),
      data: c,
    });
    const liveList = await (await ctx.request("/api/v1/events?limit=100", { key: seed.liveKey })).json();
    expect(liveList.data.map((e: { id: string }) => e.id)).not.toContain(events[0]!.id);
  });

  test("with a live key the events carry livemode true", async () => {
    const c = await (await post({ phone: "+33699999999" }, seed.liveKey)).json();
    await patch(c.id, { name: "L" }, seed.liveKey);
    await ctx.request(`/api/v1/contacts/${c.id}`, { method: "DELETE", key: seed.liveKey });
    expect((await eventsOf(c.id)).map((e) => [e.type, e.livemode])).toEqual([
      ["contact.created", true],
      ["contact.updated", true],
      ["contact.deleted", true],
    ]);
  });

  test("the event is written in the same transaction: when it cannot be written, nothing is", async () => {
    const { sql } = ctx.deps;
    const c = await (await post({ phone: "+33610101010" })).json();
    await sql`alter table events add constraint refuse_contact_events check (type not like 'contact.%') not valid`;
    try {
      const before = await sql`select count(*)::int as n from contacts`;
      const created = await post({ phone: "+33610101011" });
      await expectApiError(created, 500, "internal_error");
      expect((await sql`select count(*)::int as n from contacts`)[0]!.n).toBe(before[0]!.n);
      expect((await patch(c.id, { name: "never" })).status).toBe(500);
      const del = await ctx.request(`/api/v1/contacts/${c.id}`, { method: "DELETE", key: seed.testKey });
      expect(del.status).toBe(500);
      const still = await (await ctx.request(`/api/v1/contacts/${c.id}`, { key: seed.testKey })).json();
      expect(still).toEqual(c);
    } finally {
      await sql`alter table events drop constraint refuse_contact_events`;
    }
  });
});

describe("concurrency", () => {
  test("20 parallel PATCHes: all applied one after another, 20 events, the last one wins", async () => {
    const c = await (await post({ phone: "+33620202020" })).json();
    const names = Array.from({ length: 20 }, (_, i) => `Name ${i}`);
    const answers = await Promise.all(names.map((name) => patch(c.id, { name })));
    expect(answers.map((r) => r.status)).toEqual(names.map(() => 200));
    const events = (await eventsOf(c.id)).filter((e) => e.type === "contact.updated");
    expect(events.length).toBe(20);
    expect(new Set(events.map((e) => e.data.name))).toEqual(new Set(names));
    const final = await (await ctx.request(`/api/v1/contacts/${c.id}`, { key: seed.testKey })).json();
    expect(final.name).toBe(events[events.length - 1]!.data.name as string);
  });

  test("20 parallel DELETEs: one 200, nineteen 404, one contact.deleted", async () => {
    const c = await (await post({ phone: "+33630303030" })).json();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        ctx.request(`/api/v1/contacts/${c.id}`, { method: "DELETE", key: seed.testKey }),
      ),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, ...Array(19).fill(404)]);
    expect((await eventsOf(c.id)).filter((e) => e.type === "contact.deleted").length).toBe(1);
  });
});
