import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";

/** The do-not-call list: create (201, or 200 with the existing entry), list with `phone`, delete, modes. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function block(key: string, json: unknown) {
  return ctx.request("/api/v1/blocked-numbers", { method: "POST", key, json });
}
async function rows(phone: string) {
  return ctx.deps.sql<{ id: string; livemode: boolean; organization_id: string }[]>`
    select id, livemode, organization_id from blocked_numbers where phone = ${phone} order by id`;
}

describe("POST /v1/blocked-numbers", () => {
  test("201 with the entry in the key's mode; the same number again is 200 with that entry, unchanged", async () => {
    const res = await block(seed.liveKey, { phone: "+33611110001", reason: "Asked not to be called" });
    expect(res.status).toBe(201);
    const entry = await res.json();
    expect(Object.keys(entry).sort()).toEqual(["createdAt", "id", "livemode", "phone", "reason"]);
    expect(entry).toMatchObject({ livemode: true, phone: "+33611110001", reason: "Asked not to be called" });
    expect(entry.id).toMatch(/^bn_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(entry.createdAt).toMatch(ISO);

    const again = await block(seed.liveKey, { phone: "+33611110001", reason: "another reason" });
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(entry);
    expect((await rows("+33611110001")).length).toBe(1);
  });

  test("20 parallel requests for one number: one 201, nineteen 200, all the one entry", async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => block(seed.liveKey, { phone: "+33611110002" })),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([...Array(19).fill(200), 201]);
    const ids = new Set(await Promise.all(answers.map(async (r) => (await r.json()).id)));
    expect(ids.size).toBe(1);
    expect((await rows("+33611110002")).map((r) => r.id)).toEqual([...ids]);
  });

  test("a test key makes test entries, apart from live ones; another organization has its own list", async () => {
    const live = await (await block(seed.liveKey, { phone: "+33611110003" })).json();
    const testRes = await block(seed.testKey, { phone: "+33611110003" });
    expect(testRes.status).toBe(201);
    const testEntry = await testRes.json();
    expect(testEntry.livemode).toBe(false);
    expect(testEntry.id).not.toBe(live.id);
    const foreign = await block(other.liveKey, { phone: "+33611110003" });
    expect(foreign.status).toBe(201);
    expect((await rows("+33611110003")).length).toBe(3);
  });

  test.each([
    ["no phone", {}, "phone"],
    ["a phone not in E.164", { phone: "0611110004" }, "phone"],
    ["a phone of no country calling code", { phone: "+999611110004" }, "phone"],
    ["a phone that is a number", { phone: 33611110004 }, "phone"],
    ["an empty reason", { phone: "+33611110004", reason: " " }, "reason"],
    ["a reason too long", { phone: "+33611110004", reason: "x".repeat(501) }, "reason"],
    ["an unknown field", { phone: "+33611110004", mode: "live" }, "mode"],
  ])("%s is 400 invalid_request with param; nothing written", async (_name, json, param) => {
    const res = await block(seed.liveKey, json);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: "invalid_request", param });
    expect((await rows("+33611110004")).length).toBe(0);
  });

  test("a key with calls:read only cannot write the list (403 missing_scope)", async () => {
    const reader = await createSecretKey(ctx.deps, seed.org.id, { mode: "live", scopes: ["calls:read"] });
    const res = await block(reader.key, { phone: "+33611110005" });
    expect(res.status).toBe(403);
    expect((await res.json()).error.code).toBe("missing_scope");
    expect((await ctx.request("/api/v1/blocked-numbers", { key: reader.key })).status).toBe(200);
  });
});

describe("GET /v1/blocked-numbers", () => {
  test("the key's mode only, newest first, cursor pages, and the phone filter", async () => {
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      created.push((await (await block(seed.liveKey, { phone: `+3361222000${i}` })).json()).id);
    }
    const first = await (await ctx.request("/api/v1/blocked-numbers?limit=2", { key: seed.liveKey })).json();
    expect(first.has_more).toBe(true);
    expect(first.data.map((e: { id: string }) => e.id)).toEqual([created[4], created[3]]);
    expect(first.data.every((e: { livemode: boolean }) => e.livemode)).toBe(true);
    const second = await (
      await ctx.request(`/api/v1/blocked-numbers?limit=2&starting_after=${created[3]}`, { key: seed.liveKey })
    ).json();
    expect(second.data.map((e: { id: string }) => e.id)).toEqual([created[2], created[1]]);

    const one = await (
      await ctx.request("/api/v1/blocked-numbers?phone=%2B33612220002", { key: seed.liveKey })
    ).json();
    expect(one).toEqual({
      data: [expect.objectContaining({ id: created[2], phone: "+33612220002" })],
      has_more: false,
    });
    // An unencoded + arrives as a space and is read as the + it was meant to be.
    const spaced = await (
      await ctx.request("/api/v1/blocked-numbers?phone=+33612220002", { key: seed.liveKey })
    ).json();
    expect(spaced.data.map((e: { id: string }) => e.id)).toEqual([created[2]]);

    const tests = await (await ctx.request("/api/v1/blocked-numbers", { key: seed.testKey })).json();
    expect(tests.data.every((e: { livemode: boolean }) => !e.livemode)).toBe(true);
    expect(tests.data.some((e: { id: string }) => created.includes(e.id))).toBe(false);
  });

  test.each([
    ["phone=0612", "phone", "invalid_query"],
    ["livemode=false", "livemode", "invalid_query"],
    ["status=x", "status", "invalid_query"],
  ])("?%s is 400 with param %s", async (query, param, code) => {
    const res = await ctx.request(`/api/v1/blocked-numbers?${query}`, { key: seed.liveKey });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code, param });
  });

  test("a cursor of the other mode is 400 invalid_cursor", async () => {
    const testEntry = await (await block(seed.testKey, { phone: "+33612220009" })).json();
    const res = await ctx.request(`/api/v1/blocked-numbers?starting_after=${testEntry.id}`, {
      key: seed.liveKey,
    });
    expect(res.status).toBe(400);
    expect((await res.json()).error.code).toBe("invalid_cursor");
  });
});

describe("DELETE /v1/blocked-numbers/{id}", () => {
  test("200 {id, deleted}; then 404; an entry of the other mode or organization is 404 and stays", async () => {
    const entry = await (await block(seed.liveKey, { phone: "+33613330001" })).json();
    const testEntry = await (await block(seed.testKey, { phone: "+33613330001" })).json();
    const foreign = await (await block(other.liveKey, { phone: "+33613330001" })).json();

    for (const [key, id] of [
      [seed.testKey, entry.id],
      [seed.liveKey, testEntry.id],
      [seed.liveKey, foreign.id],
      [seed.liveKey, "bn_nope"],
      [seed.liveKey, "bn_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
    ] as const) {
      const res = await ctx.request(`/api/v1/blocked-numbers/${id}`, { method: "DELETE", key });
      expect(res.status).toBe(404);
      expect((await res.json()).error.code).toBe("not_found");
    }
    expect((await rows("+33613330001")).length).toBe(3);

    const res = await ctx.request(`/api/v1/blocked-numbers/${entry.id}`, {
      method: "DELETE",
      key: seed.liveKey,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: entry.id, deleted: true });
    const again = await ctx.request(`/api/v1/blocked-numbers/${entry.id}`, {
      method: "DELETE",
      key: seed.liveKey,
    });
    expect(again.status).toBe(404);
    expect((await rows("+33613330001")).map((r) => r.id).sort()).toEqual([testEntry.id, foreign.id].sort());
    // Listed again after the removal: a new entry.
    const relisted = await block(seed.liveKey, { phone: "+33613330001" });
    expect(relisted.status).toBe(201);
    expect((await relisted.json()).id).not.toBe(entry.id);
  });
});
