import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectApiError } from "../helpers/errors.ts";
import { type Seed, type Server, seed, startServer } from "./support.ts";

/** GET /api/v1/events over HTTP: events of the key's mode only, newest first, the type filter. */

let server: Server;
let s: Seed;
let other: Seed;
const made: { mode: "live" | "test"; contactId: string }[] = [];
beforeAll(async () => {
  server = await startServer();
  s = await seed(server);
  other = await seed(server);
  for (const mode of ["test", "live", "test"] as const) {
    const key = mode === "live" ? s.liveKey : s.testKey;
    const res = await server.fetch("/api/v1/contacts", {
      method: "POST",
      key,
      json: { phone: "+33612345678" },
    });
    const contact = await res.json();
    made.push({ mode, contactId: contact.id });
    await server.fetch(`/api/v1/contacts/${contact.id}`, { method: "PATCH", key, json: { name: "Renamed" } });
  }
  await server.fetch(`/api/v1/contacts/${made[0]!.contactId}`, { method: "DELETE", key: s.testKey });
});
afterAll(() => server.stop());

interface Event {
  id: string;
  type: string;
  livemode: boolean;
  createdAt: string;
  data: { id: string; deleted?: boolean; name?: string | null; updatedAt: string };
}

const list = async (key: string, query = "") => {
  const res = await server.fetch(`/api/v1/events?limit=100${query}`, { key });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: Event[] }).data;
};

describe("events", () => {
  test("a test key lists its mode's events only, newest first, each {id, type, livemode, createdAt, data}", async () => {
    const events = await list(s.testKey);
    expect(events.map((e) => `${e.type} ${e.data.id}`)).toEqual([
      `contact.deleted ${made[0]!.contactId}`,
      `contact.updated ${made[2]!.contactId}`,
      `contact.created ${made[2]!.contactId}`,
      `contact.updated ${made[0]!.contactId}`,
      `contact.created ${made[0]!.contactId}`,
    ]);
    for (const e of events) {
      expect(Object.keys(e).sort()).toEqual(["createdAt", "data", "id", "livemode", "type"]);
      expect(e.id).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/);
      expect(e.livemode).toBe(false);
    }
    expect(events[0]!.data).toEqual({ id: made[0]!.contactId, deleted: true, updatedAt: expect.any(String) });
    expect(events[1]!.data.name).toBe("Renamed");
  });

  test("a live key lists the live events; another organization none of them", async () => {
    const live = await list(s.liveKey);
    expect(live.map((e) => `${e.type} ${e.data.id}`)).toEqual([
      `contact.updated ${made[1]!.contactId}`,
      `contact.created ${made[1]!.contactId}`,
    ]);
    expect(await list(other.liveKey)).toEqual([]);
    expect(await list(other.testKey)).toEqual([]);
  });

  test("the type filter, and its refusal of an unknown type", async () => {
    const created = await list(s.testKey, "&type=contact.created");
    expect(created.map((e) => e.data.id)).toEqual([made[2]!.contactId, made[0]!.contactId]);
    const res = await server.fetch("/api/v1/events?type=contact.exploded", { key: s.testKey });
    await expectApiError(res, 400, "invalid_query", { param: "type" });
  });

  test("pages of 2 walk the same events", async () => {
    const all = await list(s.testKey);
    const walked: string[] = [];
    let cursor = "";
    for (;;) {
      const res = await server.fetch(`/api/v1/events?limit=2${cursor}`, { key: s.testKey });
      const page = (await res.json()) as { data: Event[]; has_more: boolean };
      walked.push(...page.data.map((e) => e.id));
      if (!page.has_more) break;
      cursor = `&starting_after=${page.data.at(-1)!.id}`;
    }
    expect(walked).toEqual(all.map((e) => e.id));
  });
});
