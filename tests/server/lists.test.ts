import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ErrorCode } from "../../src/errors.ts";
import { expectApiError } from "../helpers/errors.ts";
import { type Seed, type Server, seed, startServer } from "./support.ts";

/** The cursor convention over HTTP: walking a list page by page, and the refusals of its parameters. */

let server: Server;
let s: Seed;
const made: string[] = [];
beforeAll(async () => {
  server = await startServer();
  s = await seed(server);
  for (let i = 0; i < 23; i++) {
    const res = await server.fetch("/api/v1/contacts", {
      method: "POST",
      key: s.liveKey,
      json: { phone: "+33612345678", name: `Contact ${i}` },
    });
    made.push((await res.json()).id);
  }
});
afterAll(() => server.stop());

async function walk(limit: number): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let pages = 0;
  let cursor: string | undefined;
  for (;;) {
    const query = `limit=${limit}${cursor ? `&starting_after=${cursor}` : ""}`;
    const res = await server.fetch(`/api/v1/contacts?${query}`, { key: s.liveKey });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { data: { id: string }[]; has_more: boolean };
    pages++;
    expect(page.data.length).toBeLessThanOrEqual(limit);
    ids.push(...page.data.map((c) => c.id));
    if (!page.has_more) return { ids, pages };
    cursor = page.data.at(-1)!.id;
  }
}

const expectError = async (path: string, status: number, code: ErrorCode, param: string) =>
  expectApiError(await server.fetch(path, { key: s.liveKey }), status, code, { param, label: path });

describe("cursor lists", () => {
  test("a walk by pages of 5 meets every item once, newest first, and ends with has_more false", async () => {
    const { ids, pages } = await walk(5);
    expect(ids).toEqual([...made].reverse());
    expect(pages).toBe(5);
  });

  test("the default page is 20 items; limit 100 takes them all", async () => {
    const first = await (await server.fetch("/api/v1/contacts", { key: s.liveKey })).json();
    expect(first.data).toHaveLength(20);
    expect(first.has_more).toBe(true);
    const all = await (await server.fetch("/api/v1/contacts?limit=100", { key: s.liveKey })).json();
    expect(all.data.map((c: { id: string }) => c.id)).toEqual([...made].reverse());
    expect(all.has_more).toBe(false);
  });

  test("the last item as a cursor gives an empty last page", async () => {
    const res = await server.fetch(`/api/v1/contacts?starting_after=${made[0]}`, { key: s.liveKey });
    expect(await res.json()).toEqual({ data: [], has_more: false });
  });

  test("limit out of range, not an integer or empty is 400 invalid_query with param limit", async () => {
    for (const limit of ["0", "101", "abc", "2.5", ""]) {
      await expectError(`/api/v1/contacts?limit=${limit}`, 400, "invalid_query", "limit");
    }
  });

  test("a cursor of another resource type or unknown is 400 invalid_cursor; a malformed one invalid_query", async () => {
    for (const cursor of ["call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", s.agent.id, "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"]) {
      await expectError(`/api/v1/contacts?starting_after=${cursor}`, 400, "invalid_cursor", "starting_after");
    }
    for (const cursor of ["garbage", "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C%27%20or%201%3D1"]) {
      await expectError(`/api/v1/contacts?starting_after=${cursor}`, 400, "invalid_query", "starting_after");
    }
  });

  test("a livemode filter other than true or false is 400 invalid_query", async () => {
    await expectError("/api/v1/calls?livemode=yes", 400, "invalid_query", "livemode");
  });
});
