import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { IdGenerator } from "../../src/ids.ts";
import { type EventType, recordEvent, recordEvents } from "../../src/services/events.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { databaseScheduler } from "../../src/timers/scheduler.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/** GET /v1/events: the key's mode only, the type filter, the cursor convention. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");
const recorded: { id: string; type: EventType; livemode: boolean; org: string }[] = [];

const TYPES: EventType[] = ["call.started", "call.ended", "contact.created", "knowledge.document_ready"];

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
  for (let i = 0; i < 40; i++) {
    // Every third event shares its timestamp with the previous one.
    if (i % 3 !== 0) clock.advance(1);
    const org = i % 10 === 9 ? other.org.id : seed.org.id;
    const e = { type: TYPES[i % TYPES.length]!, livemode: i % 2 === 0, org };
    const id = await recordEvent(ctx.deps.sql, ctx.deps, {
      organizationId: org,
      agentId: null,
      type: e.type,
      livemode: e.livemode,
      data: { n: i },
    });
    recorded.push({ id, ...e });
  }
});
afterAll(() => ctx.close());

async function walk(key: string, query = "", limit = 3) {
  const out: { id: string; type: string; livemode: boolean; createdAt: string; data: unknown }[] = [];
  let cursor: string | undefined;
  for (;;) {
    const res = await ctx.request(
      `/api/v1/events?limit=${limit}${query}${cursor ? `&starting_after=${cursor}` : ""}`,
      { key },
    );
    expect(res.status).toBe(200);
    const page = await res.json();
    out.push(...page.data);
    if (!page.has_more) return out;
    cursor = page.data[page.data.length - 1].id;
  }
}

const expectedIds = (f: (e: (typeof recorded)[number]) => boolean) =>
  recorded
    .filter(f)
    .map((e) => e.id)
    .reverse();

describe("mode isolation", () => {
  test("a test key sees exactly the organization's livemode false events, newest first", async () => {
    const events = await walk(seed.testKey);
    expect(events.map((e) => e.id)).toEqual(expectedIds((e) => e.org === seed.org.id && !e.livemode));
    expect(events.every((e) => e.livemode === false)).toBe(true);
  });

  test("a live key sees exactly the livemode true events", async () => {
    const events = await walk(seed.liveKey, "", 7);
    expect(events.map((e) => e.id)).toEqual(expectedIds((e) => e.org === seed.org.id && e.livemode));
  });

  test("another organization sees none of them", async () => {
    const events = await walk(other.liveKey);
    expect(events.map((e) => e.id)).toEqual(expectedIds((e) => e.org === other.org.id && e.livemode));
  });

  test("the event object is {id, type, livemode, createdAt, data}", async () => {
    const [first] = await walk(seed.testKey, "", 100);
    const source = recorded.filter((e) => e.org === seed.org.id && !e.livemode).pop()!;
    expect(first).toEqual({
      id: source.id,
      type: source.type,
      livemode: false,
      createdAt: expect.stringMatching(/^2026-11-21T09:30:00\.\d{3}Z$/),
      data: { n: recorded.indexOf(source) },
    });
  });
});

describe("livemode query", () => {
  test("the key's own mode is accepted, the other one is 400 invalid_query with param livemode", async () => {
    const own = await walk(seed.testKey, "&livemode=false");
    expect(own.map((e) => e.id)).toEqual(expectedIds((e) => e.org === seed.org.id && !e.livemode));
    const ownLive = await walk(seed.liveKey, "&livemode=true&type=call.started");
    expect(ownLive.map((e) => e.id)).toEqual(
      expectedIds((e) => e.org === seed.org.id && e.livemode && e.type === "call.started"),
    );
    for (const [key, value] of [
      [seed.testKey, "true"],
      [seed.liveKey, "false"],
      [seed.testKey, "False"],
      [seed.testKey, "0"],
      [seed.testKey, ""],
    ] as const) {
      const res = await ctx.request(`/api/v1/events?livemode=${value}`, { key });
      expect(res.status).toBe(400);
      expect((await res.json()).error).toMatchObject({ code: "invalid_query", param: "livemode" });
    }
  });
});

describe("type filter", () => {
  test("each type lists only its events, in both modes", async () => {
    for (const type of TYPES) {
      for (const [key, livemode] of [
        [seed.testKey, false],
        [seed.liveKey, true],
      ] as const) {
        const events = await walk(key, `&type=${type}`, 2);
        expect(events.map((e) => e.id)).toEqual(
          expectedIds((e) => e.org === seed.org.id && e.livemode === livemode && e.type === type),
        );
      }
    }
  });

  test("a known type without events is an empty list", async () => {
    const res = await ctx.request("/api/v1/events?type=campaign.cancelled", { key: seed.testKey });
    expect(await res.json()).toEqual({ data: [], has_more: false });
  });

  test("an unknown type is 400 invalid_query with param type", async () => {
    for (const q of ["call", "CALL.STARTED", "contact.*", "call.started,call.ended"]) {
      const res = await ctx.request(`/api/v1/events?type=${encodeURIComponent(q)}`, { key: seed.testKey });
      expect(res.status).toBe(400);
      expect((await res.json()).error).toMatchObject({ code: "invalid_query", param: "type" });
    }
  });
});

describe("keys and scopes", () => {
  test("events:read is required; no key is 401", async () => {
    const c = ctx.deps;
    const k = await createSecretKey(c, seed.org.id, {
      mode: "test",
      scopes: ["contacts:read", "webhooks:read"],
    });
    const denied = await ctx.request("/api/v1/events", { key: k.key });
    await expectApiError(denied, 403, "missing_scope");
    const ok = await createSecretKey(c, seed.org.id, { mode: "test", scopes: ["events:read"] });
    expect((await ctx.request("/api/v1/events", { key: ok.key })).status).toBe(200);
    const none = await ctx.request("/api/v1/events");
    await expectApiError(none, 401, "invalid_key");
  });
});

describe("recording a batch", () => {
  test("several events in one statement keep their order, modes, organizations and data", async () => {
    const batchClock = new ManualClock("2026-11-22T08:00:00.000Z");
    const batchDeps = { clock: batchClock, ids: new IdGenerator(batchClock), timers: databaseScheduler };
    const org = await seedOrganization(ctx);
    const input = [
      {
        organizationId: org.org.id,
        agentId: null,
        type: "call.ended" as const,
        livemode: false,
        data: { n: 1, nested: { a: [1, "x"] } },
      },
      {
        organizationId: org.org.id,
        agentId: null,
        type: "call.transcript_ready" as const,
        livemode: true,
        data: { n: 2, s: "l'été \"" },
      },
      {
        organizationId: org.org.id,
        agentId: null,
        type: "call.analysis_ready" as const,
        livemode: false,
        data: { n: 3, v: null },
      },
    ];
    const ids = await recordEvents(ctx.deps.sql, batchDeps, input);
    expect(ids).toHaveLength(3);
    expect([...ids].sort()).toEqual(ids);
    const rows = await ctx.deps.sql<{ id: string; type: string; livemode: boolean; data: unknown }[]>`
      select id, type, livemode, data from events where organization_id = ${org.org.id} order by id`;
    expect(rows.map((r) => r.id)).toEqual(ids);
    expect(rows.map((r) => ({ type: r.type, livemode: r.livemode, data: r.data }))).toEqual(
      input.map((e) => ({ type: e.type, livemode: e.livemode, data: e.data })),
    );
    expect(await recordEvents(ctx.deps.sql, batchDeps, [])).toEqual([]);
  });
});
