import { afterAll, beforeAll, expect, test } from "bun:test";
import type { VoiceService } from "voice-service/client";
import { type ClientWorld, startClientWorld } from "./support.ts";

/**
 * Auto-pagination over 250 calls: `for await` follows `starting_after` from page to page, asking for
 * a page only when the previous one is used up, and yields every call once, newest first.
 */

let world: ClientWorld;
let client: VoiceService;
/** The query of every list request the client sent. */
const listRequests: URLSearchParams[] = [];
const created: string[] = [];

beforeAll(async () => {
  world = await startClientWorld();
  client = world.client(world.seed.testKey, {
    fetch: (input, init) => {
      const url = new URL(input);
      if (url.pathname === "/api/v1/calls" && init.method === "GET") listRequests.push(url.searchParams);
      return fetch(input, init);
    },
  });
  for (let i = 0; i < 250; i++) {
    const call = await client.calls.create({ agentId: world.seed.agent.id, to: "+33612345678" });
    created.push(call.id);
  }
});
afterAll(() => world.close());

test("for await reads the 250 calls once each, newest first, in 3 pages of at most 100", async () => {
  listRequests.length = 0;
  const seen: string[] = [];
  for await (const call of client.calls.list({ limit: 100, status: "initiated" })) seen.push(call.id);
  expect(seen).toHaveLength(250);
  expect(new Set(seen).size).toBe(250);
  expect(seen).toEqual([...created].reverse());
  expect(listRequests.map((q) => q.get("starting_after"))).toEqual([null, seen[99]!, seen[199]!]);
  // The filters go with every page, not only the first.
  expect(listRequests.map((q) => `${q.get("limit")} ${q.get("status")}`)).toEqual(
    Array(3).fill("100 initiated"),
  );
});

test("page() reads one page; pages() page by page; starting_after starts after that id", async () => {
  const first = await client.calls.list({ limit: 100 }).page();
  expect(first.data.map((c) => c.id)).toEqual([...created].reverse().slice(0, 100));
  expect(first.has_more).toBe(true);

  const sizes: number[] = [];
  for await (const page of client.calls.list({ limit: 100 }).pages()) sizes.push(page.data.length);
  expect(sizes).toEqual([100, 100, 50]);

  const rest = await client.calls.list({ limit: 100, starting_after: created[10]! }).toArray();
  expect(rest.map((c) => c.id)).toEqual(created.slice(0, 10).reverse());
});

test("breaking out of the loop asks for no further page; toArray(max) stops at max", async () => {
  listRequests.length = 0;
  for await (const call of client.calls.list({ limit: 100 })) {
    if (call.id === created[200]) break;
  }
  expect(listRequests).toHaveLength(1);
  expect(await client.calls.list({ limit: 20 }).toArray(45)).toHaveLength(45);
});

test("a filter that matches nothing yields nothing, in one request", async () => {
  listRequests.length = 0;
  expect(await client.calls.list({ status: "completed" }).toArray()).toEqual([]);
  expect(listRequests).toHaveLength(1);
});
