import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { type Seed, type Server, seed, startServer } from "./support.ts";

/** Contacts over HTTP: the resource in both modes, its validation, another organization's, concurrent writes. */

let server: Server;
let s: Seed;
let other: Seed;
beforeAll(async () => {
  server = await startServer();
  s = await seed(server);
  other = await seed(server);
});
afterAll(() => server.stop());

const ID = /^ct_[0-9A-HJKMNP-TV-Z]{26}$/;
const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const post = (json: unknown, key = s.testKey) =>
  server.fetch("/api/v1/contacts", { method: "POST", key, json });
const patch = (id: string, json: unknown, key = s.testKey) =>
  server.fetch(`/api/v1/contacts/${id}`, { method: "PATCH", key, json });

describe("contacts", () => {
  test("POST answers 201 with every field; GET returns the same object; the list has it first", async () => {
    const res = await post({ phone: "+33612345678", name: "Jeanne", metadata: { vip: true, score: 4.5 } });
    expect(res.status).toBe(201);
    const c = await res.json();
    expect(c).toEqual({
      id: expect.stringMatching(ID),
      phone: "+33612345678",
      name: "Jeanne",
      email: null,
      metadata: { vip: true, score: 4.5 },
      createdAt: expect.stringMatching(TIME),
      updatedAt: c.createdAt,
    });
    expect(await (await server.fetch(`/api/v1/contacts/${c.id}`, { key: s.testKey })).json()).toEqual(c);
    const list = await (await server.fetch("/api/v1/contacts?limit=1", { key: s.testKey })).json();
    expect(list.data).toEqual([c]);
  });

  test("are real in both modes: written with a test key, read with a live key", async () => {
    const c = await (await post({ phone: "+33611111111" })).json();
    expect((await server.fetch(`/api/v1/contacts/${c.id}`, { key: s.liveKey })).status).toBe(200);
  });

  test("PATCH changes only the fields sent; null clears; updatedAt moves", async () => {
    const c = await (await post({ phone: "+33622222222", name: "A", email: "a@example.com" })).json();
    await Bun.sleep(5);
    const renamed = await (await patch(c.id, { name: "B" })).json();
    expect(renamed).toMatchObject({ name: "B", email: "a@example.com", phone: "+33622222222" });
    expect(renamed.updatedAt > c.updatedAt).toBe(true);
    const cleared = await (await patch(c.id, { email: null })).json();
    expect(cleared).toMatchObject({ name: "B", email: null });
  });

  test("DELETE answers {id, deleted: true}, then the contact is 404 for every verb", async () => {
    const c = await (await post({ phone: "+33633333333" })).json();
    const del = await server.fetch(`/api/v1/contacts/${c.id}`, { method: "DELETE", key: s.testKey });
    expect(await del.json()).toEqual({ id: c.id, deleted: true, updatedAt: expect.any(String) });
    expect(await outcomeOf(await server.fetch(`/api/v1/contacts/${c.id}`, { key: s.testKey }))).toBe(
      "404 not_found",
    );
    expect(await outcomeOf(await patch(c.id, { name: "X" }))).toBe("404 not_found");
    const again = await server.fetch(`/api/v1/contacts/${c.id}`, { method: "DELETE", key: s.testKey });
    expect(await outcomeOf(again)).toBe("404 not_found");
  });

  test("another organization's contact is 404 and stays untouched", async () => {
    const c = await (await post({ phone: "+33644444444", name: "Mine" })).json();
    expect(await outcomeOf(await server.fetch(`/api/v1/contacts/${c.id}`, { key: other.liveKey }))).toBe(
      "404 not_found",
    );
    expect(await outcomeOf(await patch(c.id, { name: "Theirs" }, other.liveKey))).toBe("404 not_found");
    const del = await server.fetch(`/api/v1/contacts/${c.id}`, { method: "DELETE", key: other.liveKey });
    expect(await outcomeOf(del)).toBe("404 not_found");
    expect((await (await server.fetch(`/api/v1/contacts/${c.id}`, { key: s.testKey })).json()).name).toBe(
      "Mine",
    );
  });

  test("bad input is a 400 in the envelope naming the field; nothing is written", async () => {
    const before = (await (await server.fetch("/api/v1/contacts?limit=100", { key: s.testKey })).json()).data
      .length;
    const cases: [unknown, string][] = [
      [{}, "phone"],
      [{ phone: "0612345678" }, "phone"],
      [{ phone: "+33612345678", metadata: { nested: { no: 1 } } }, "metadata.nested"],
      [{ phone: "+33612345678", surprise: 1 }, "surprise"],
    ];
    for (const [body, param] of cases) {
      await expectApiError(await post(body), 400, "invalid_request", { param, label: JSON.stringify(body) });
    }
    const notJson = await server.fetch("/api/v1/contacts", {
      method: "POST",
      key: s.testKey,
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(await outcomeOf(notJson)).toBe("400 invalid_request");
    const notDeclared = await server.fetch("/api/v1/contacts", {
      method: "POST",
      key: s.testKey,
      headers: { "content-type": "text/plain" },
      body: JSON.stringify({ phone: "+33612345678" }),
    });
    expect(await outcomeOf(notDeclared)).toBe("415 unsupported_media_type");
    const after = (await (await server.fetch("/api/v1/contacts?limit=100", { key: s.testKey })).json()).data
      .length;
    expect(after).toBe(before);
  });

  test("20 creations at once: 20 contacts, each listed once", async () => {
    const phone = "+33655555555";
    const created = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const res = await post({ phone, name: `Parallel ${i}` });
        expect(res.status).toBe(201);
        return (await res.json()).id as string;
      }),
    );
    expect(new Set(created).size).toBe(20);
    const listed = await (
      await server.fetch(`/api/v1/contacts?limit=100&phone=${encodeURIComponent(phone)}`, { key: s.testKey })
    ).json();
    expect(listed.data.map((c: { id: string }) => c.id).sort()).toEqual(created.sort());
  });
});
