import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { idTime } from "../../src/ids.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { MAX_ENDPOINTS } from "../../src/services/webhookEndpoints.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { concretePath, fetchDocument, jsonBodyOf, operations } from "../helpers/openapi.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  expectedSignature,
  type Received,
  startWebhookReceiver,
  type WebhookReceiver,
} from "../helpers/webhookReceiver.ts";

/**
 * Webhook endpoints per mode, managed: read one, change it, rotate its secret (both signatures for a
 * day), its delivery log, redelivery of an event, the limit per organization and mode, and which
 * events each endpoint receives.
 */

// biome-ignore lint/suspicious/noExplicitAny: JSON answers are read freely, as a client would
type Json = any;

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = startWebhookReceiver();
  ctx = await createTestContext({ timers: true, env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
  seed = await seedOrganization(ctx);
});
afterAll(async () => {
  await ctx.close();
  receiver.stop();
});

async function call(method: string, path: string, key: string, json?: unknown) {
  const res = await ctx.request(path, { method, key, ...(json !== undefined ? { json } : {}) });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Json };
}

async function createEndpoint(key: string, path: string, extra: Record<string, unknown> = {}) {
  const { status, body } = await call("POST", "/api/v1/webhook-endpoints", key, {
    url: receiver.url(path),
    ...extra,
  });
  expect(status).toBe(201);
  return body;
}

/** Creates a contact with `key` (an event of the key's mode) and returns the event. */
async function contactEvent(key: string): Promise<Json> {
  const res = await call("POST", "/api/v1/contacts", key, { phone: "+33612345678" });
  expect(res.status).toBe(201);
  const events = await call("GET", "/api/v1/events?type=contact.created&limit=1", key);
  return events.body.data[0];
}

const arrivals = (path: string, eventId: string) =>
  receiver.at(path).filter((r) => r.headers["webhook-id"] === eventId);

describe("which endpoints receive an event", () => {
  test("a live endpoint receives both modes, a test endpoint only test events, a disabled one nothing", async () => {
    await createEndpoint(seed.liveKey, "/mode-live");
    await createEndpoint(seed.testKey, "/mode-test");
    await createEndpoint(seed.liveKey, "/mode-disabled", { enabled: false });
    const testEvent = await contactEvent(seed.testKey);
    const liveEvent = await contactEvent(seed.liveKey);
    await waitUntil("the live endpoint's two events", () =>
      arrivals("/mode-live", testEvent.id).length && arrivals("/mode-live", liveEvent.id).length
        ? true
        : undefined,
    );
    await waitUntil("the test endpoint's test event", () =>
      arrivals("/mode-test", testEvent.id).length ? true : undefined,
    );
    // Give a wrongly routed delivery time to show up: the live event has reached the live endpoint.
    await Bun.sleep(300);
    expect(arrivals("/mode-test", liveEvent.id)).toEqual([]);
    expect(receiver.at("/mode-disabled")).toEqual([]);
    const [row] = await ctx.deps.sql<{ n: number }[]>`
      select count(*)::int as n from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id
      where e.url like '%/mode-disabled'`;
    expect(row!.n).toBe(0);
  });
});

describe("read, change, delete per mode", () => {
  test("GET one: the key's mode only; the other mode, unknown and malformed ids are 404", async () => {
    const live = await createEndpoint(seed.liveKey, "/read", { events: ["call.ended"] });
    const { secret: _, ...shown } = live;
    expect(await call("GET", `/api/v1/webhook-endpoints/${live.id}`, seed.liveKey)).toEqual({
      status: 200,
      body: shown,
    });
    for (const id of [live.id, "we_x", "we_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", seed.agent.id]) {
      const res = await call("GET", `/api/v1/webhook-endpoints/${id}`, seed.testKey);
      expect(`${id} ${res.status} ${res.body.error.code}`).toBe(`${id} 404 not_found`);
    }
  });

  test("PATCH url, events (null: all again) and enabled; fields left out keep their value", async () => {
    const e = await createEndpoint(seed.testKey, "/patch", { events: ["contact.created"] });
    const path = `/api/v1/webhook-endpoints/${e.id}`;
    const moved = await call("PATCH", path, seed.testKey, { url: receiver.url("/patched") });
    expect(moved).toMatchObject({
      status: 200,
      body: { url: receiver.url("/patched"), events: ["contact.created"] },
    });
    const off = await call("PATCH", path, seed.testKey, {
      enabled: false,
      events: ["call.ended", "call.started"],
    });
    expect(off.body).toMatchObject({ enabled: false, events: ["call.started", "call.ended"] });
    const all = await call("PATCH", path, seed.testKey, { events: null, enabled: true });
    expect(all.body.events).toHaveLength(11);
    expect(all.body).toMatchObject({ enabled: true, url: receiver.url("/patched"), livemode: false });
    expect((await call("PATCH", path, seed.testKey, {})).body).toEqual(all.body);
    // Refusals change nothing.
    for (const [json, param] of [
      [{ url: "ftp://x.example.com/h" }, "url"],
      [{ events: [] }, "events"],
      [{ events: ["call.nope"] }, "events.0"],
      [{ enabled: "yes" }, "enabled"],
      [{ livemode: true }, "livemode"],
      [{ secret: "whsec_x" }, "secret"],
    ] as const) {
      const res = await call("PATCH", path, seed.testKey, json);
      expect(`${res.status} ${res.body.error.code} ${res.body.error.param}`).toBe(
        `400 invalid_request ${param}`,
      );
    }
    expect((await call("PATCH", path, seed.liveKey, { enabled: false })).status).toBe(404);
    expect((await call("GET", path, seed.testKey)).body).toEqual(all.body);
  });

  test("a disabled endpoint's pending deliveries are dropped, shown failed in its log", async () => {
    const e = await createEndpoint(seed.liveKey, "/hang-then-disabled");
    // Disabled in the same breath as the event: its delivery may not have been sent yet.
    await call("PATCH", `/api/v1/webhook-endpoints/${e.id}`, seed.liveKey, { enabled: false });
    await ctx.deps.sql`
      insert into webhook_deliveries (event_id, endpoint_id)
      select id, ${e.id} from events where organization_id = ${seed.org.id} limit 1`;
    await ctx.deps.sql`
      insert into timers (kind, due_at, payload)
      select 'webhook.deliver', now(), jsonb_build_object('deliveryId', id) from webhook_deliveries
      where endpoint_id = ${e.id}`;
    const log = await waitUntil("the drop", async () => {
      const { body } = await call("GET", `/api/v1/webhook-endpoints/${e.id}/deliveries`, seed.liveKey);
      return body.data[0]?.status === "failed" ? body : undefined;
    });
    expect(log.data[0]).toMatchObject({ attempt: 0, error: "endpoint disabled", responseStatus: null });
    expect(receiver.at("/hang-then-disabled")).toEqual([]);
  });
});

describe("rotating the secret", () => {
  test("for 24 hours deliveries carry both signatures, then the new one alone", async () => {
    const e = await createEndpoint(seed.liveKey, "/rotate", { events: ["contact.created"] });
    const before = Date.now();
    const rotated = await call("POST", `/api/v1/webhook-endpoints/${e.id}/rotate-secret`, seed.liveKey);
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(e.secret);
    const expires = Date.parse(rotated.body.previousSecretExpiresAt);
    expect(expires - before).toBeGreaterThanOrEqual(24 * 3600_000 - 5_000);
    expect(expires - before).toBeLessThanOrEqual(24 * 3600_000 + 5_000);
    const { secret: _s, previousSecretExpiresAt: _p, ...shown } = rotated.body;
    const { secret: _o, ...original } = e;
    expect(shown).toEqual(original);
    expect(ctx.logs.join("\n")).not.toContain(rotated.body.secret.slice(6));

    const signatures = async (): Promise<string[]> => {
      const event = await contactEvent(seed.liveKey);
      const got: Received = await waitUntil("the delivery", () => arrivals("/rotate", event.id)[0]);
      const timestamp = got.headers["webhook-timestamp"]!;
      const parts = got.headers["webhook-signature"]!.split(" ");
      return parts.map((p) =>
        p === expectedSignature(rotated.body.secret, event.id, timestamp, got.body)
          ? "new"
          : p === expectedSignature(e.secret, event.id, timestamp, got.body)
            ? "old"
            : p,
      );
    };
    expect(await signatures()).toEqual(["new", "old"]);
    // A day later the previous secret has expired.
    await ctx.deps.sql`
      update webhook_endpoints set previous_secrets = jsonb_set(previous_secrets, '{0,expiresAt}',
        to_jsonb(now() - interval '1 second')) where id = ${e.id}`;
    expect(await signatures()).toEqual(["new"]);
  });

  test("a second rotation within the day keeps the first replaced secret signing for its own day", async () => {
    const e = await createEndpoint(seed.liveKey, "/rotate-twice", { events: ["contact.created"] });
    const path = `/api/v1/webhook-endpoints/${e.id}/rotate-secret`;
    const second = (await call("POST", path, seed.liveKey)).body;
    const third = (await call("POST", path, seed.liveKey)).body;
    const names = new Map([
      [third.secret as string, "third"],
      [second.secret as string, "second"],
      [e.secret, "first"],
    ]);
    const signatures = async (): Promise<string[]> => {
      const event = await contactEvent(seed.liveKey);
      const got: Received = await waitUntil("the delivery", () => arrivals("/rotate-twice", event.id)[0]);
      const timestamp = got.headers["webhook-timestamp"]!;
      return got.headers["webhook-signature"]!.split(" ").map((p) => {
        for (const [secret, name] of names) {
          if (p === expectedSignature(secret, event.id, timestamp, got.body)) return name;
        }
        return p;
      });
    };
    // The current secret first, then those it replaced, newest first.
    expect(await signatures()).toEqual(["third", "second", "first"]);
    // The first one's day ends first (its expiry is the earliest): then the other two sign.
    await ctx.deps.sql`
      update webhook_endpoints set previous_secrets = jsonb_set(previous_secrets, '{1,expiresAt}',
        to_jsonb(now() - interval '1 second')) where id = ${e.id}`;
    expect(await signatures()).toEqual(["third", "second"]);
  });

  test("rotations within a day keep at most the newest ten replaced secrets", async () => {
    const e = await createEndpoint(seed.liveKey, "/rotate-many");
    const path = `/api/v1/webhook-endpoints/${e.id}/rotate-secret`;
    const issued: string[] = [e.secret];
    for (let i = 0; i < 12; i++) issued.push((await call("POST", path, seed.liveKey)).body.secret);
    const [row] = await ctx.deps.sql<{ secret: string; previous: string[] }[]>`
      select secret, array(select p ->> 'secret' from jsonb_array_elements(previous_secrets) p) as previous
      from webhook_endpoints where id = ${e.id}`;
    expect(row!.secret).toBe(issued[12]!);
    expect(row!.previous).toEqual(issued.slice(2, 12).reverse());
  });

  test("the other mode's endpoint and unknown ids are 404", async () => {
    const e = await createEndpoint(seed.liveKey, "/rotate-other");
    for (const [id, key] of [
      [e.id, seed.testKey],
      ["we_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", seed.liveKey],
    ] as const) {
      const res = await call("POST", `/api/v1/webhook-endpoints/${id}/rotate-secret`, key);
      expect(`${res.status} ${res.body.error.code}`).toBe("404 not_found");
    }
    const [row] = await ctx.deps
      .sql`select secret, previous_secrets from webhook_endpoints where id = ${e.id}`;
    expect(row).toEqual({ secret: e.secret, previous_secrets: [] });
  });
});

describe("the delivery log and redelivery", () => {
  test("each delivery with its attempts, last status and duration, newest first, in the cursor convention", async () => {
    receiver.script("/log", [500]);
    const e = await createEndpoint(seed.liveKey, "/log", { events: ["contact.created"] });
    const first = await contactEvent(seed.liveKey);
    const second = await contactEvent(seed.liveKey);
    const path = `/api/v1/webhook-endpoints/${e.id}/deliveries`;
    const log = await waitUntil("both outcomes", async () => {
      const { body } = await call("GET", path, seed.liveKey);
      // An attempt is counted as its request starts; its status comes with its outcome.
      return body.data.length === 2 && body.data.every((d: Json) => d.responseStatus !== null)
        ? body
        : undefined;
    });
    expect(log.has_more).toBe(false);
    expect(log.data.map((d: Json) => d.eventId)).toEqual([second.id, first.id]);
    // Made with its event, so never dated before it.
    for (const [d, event] of [
      [log.data[0], second],
      [log.data[1], first],
    ]) {
      expect(Date.parse(d.createdAt)).toBeGreaterThanOrEqual(Date.parse(event.createdAt));
    }
    const failed = log.data.find((d: Json) => d.responseStatus === 500);
    const succeeded = log.data.find((d: Json) => d.responseStatus === 200);
    expect(failed).toMatchObject({ status: "pending", attempt: 1, error: "answered 500", endpointId: e.id });
    expect(succeeded).toMatchObject({ status: "succeeded", attempt: 1, error: null });
    for (const d of log.data) {
      expect(d.id).toMatch(/^whd_[0-9A-HJKMNP-TV-Z]{26}$/);
      // A ULID like every other id: its time is the delivery's creation.
      expect(idTime(d.id)).toBe(Date.parse(d.createdAt));
      expect(d.durationMs).toBeGreaterThanOrEqual(0);
      expect(d.durationMs).toBeLessThan(15_000);
      expect(Object.keys(d).sort()).toEqual(
        [
          "id",
          "eventId",
          "endpointId",
          "attempt",
          "status",
          "responseStatus",
          "durationMs",
          "error",
          "createdAt",
        ].sort(),
      );
    }
    const page = await call("GET", `${path}?limit=1`, seed.liveKey);
    expect(page.body).toEqual({ data: [log.data[0]], has_more: true });
    const next = await call("GET", `${path}?limit=1&starting_after=${log.data[0].id}`, seed.liveKey);
    expect(next.body).toEqual({ data: [log.data[1]], has_more: false });
    // A cursor of another endpoint's log, a malformed one, and the other mode's key.
    const otherLog = await createEndpoint(seed.liveKey, "/log-other");
    const foreign = await call(
      "GET",
      `/api/v1/webhook-endpoints/${otherLog.id}/deliveries?starting_after=${log.data[0].id}`,
      seed.liveKey,
    );
    expect(`${foreign.status} ${foreign.body.error.code}`).toBe("400 invalid_cursor");
    const bad = await call("GET", `${path}?starting_after=whd_x`, seed.liveKey);
    expect(`${bad.status} ${bad.body.error.code}`).toBe("400 invalid_query");
    // An id whose time was altered names no delivery: the time is part of what enciphers the number.
    const id = log.data[0].id as string;
    const altered = `${id.slice(0, 13)}${id[13] === "0" ? "1" : "0"}${id.slice(14)}`;
    const forged = await call("GET", `${path}?starting_after=${altered}`, seed.liveKey);
    expect(`${forged.status} ${forged.body.error.code}`).toBe("400 invalid_cursor");
    // Consecutive deliveries do not show consecutive numbers (the log tells no count).
    const tail = (x: string) =>
      [...x.slice(14)].reduce((v, ch) => v * 32n + BigInt(CROCKFORD.indexOf(ch)), 0n);
    const gap = tail(id) - tail(log.data[1].id);
    expect(gap > 1_000_000n || gap < -1_000_000n).toBe(true);
    expect((await call("GET", path, seed.testKey)).status).toBe(404);
  });

  test("redeliver: a new delivery to each receiving endpoint, the same webhook-id; the other mode's event is 404", async () => {
    const live = await createEndpoint(seed.liveKey, "/again-live", { events: ["contact.created"] });
    const test = await createEndpoint(seed.testKey, "/again-test", { events: ["contact.created"] });
    const event = await contactEvent(seed.testKey);
    await waitUntil("the first deliveries", () =>
      arrivals("/again-live", event.id).length && arrivals("/again-test", event.id).length ? true : undefined,
    );
    const res = await call("POST", `/api/v1/events/${event.id}/redeliver`, seed.testKey);
    expect(res.status).toBe(200);
    expect(res.body.eventId).toBe(event.id);
    const targets = res.body.deliveries.map((d: Json) => d.endpointId).sort();
    // The answer lists the test endpoints (ours, and any other test endpoint of this organization):
    // the live endpoint receives the event again too, but a test key never sees a live endpoint.
    expect(targets).toContain(test.id);
    expect(targets).not.toContain(live.id);
    const testEndpoints = (await call("GET", "/api/v1/webhook-endpoints?limit=100", seed.testKey)).body.data;
    const testIds = new Set(testEndpoints.map((e: Json) => e.id));
    expect(targets.every((id: string) => testIds.has(id))).toBe(true);
    expect(res.body.deliveries.every((d: Json) => d.status === "pending" && d.attempt === 0)).toBe(true);
    // A live key redelivering a live event sees its live endpoints.
    const liveEvent = await contactEvent(seed.liveKey);
    const liveAgain = await call("POST", `/api/v1/events/${liveEvent.id}/redeliver`, seed.liveKey);
    expect(liveAgain.body.deliveries.map((d: Json) => d.endpointId)).toContain(live.id);
    await waitUntil("the second deliveries", () =>
      arrivals("/again-live", event.id).length === 2 && arrivals("/again-test", event.id).length === 2
        ? true
        : undefined,
    );
    const [a, b] = arrivals("/again-test", event.id);
    expect(b!.body).toBe(a!.body);
    const log = await call("GET", `/api/v1/webhook-endpoints/${test.id}/deliveries`, seed.testKey);
    expect(log.body.data.filter((d: Json) => d.eventId === event.id)).toHaveLength(2);

    for (const id of [liveEvent.id, "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "evt_x", seed.agent.id]) {
      const r = await call("POST", `/api/v1/events/${id}/redeliver`, seed.testKey);
      expect(`${id} ${r.status} ${r.body.error.code}`).toBe(`${id} 404 not_found`);
    }
  });
});

describe("at most 20 endpoints per organization and mode", () => {
  test("parallel creations stop at exactly 20; disabled ones count; the other mode has its own 20", async () => {
    const org = await seedOrganization(ctx);
    await createEndpoint(org.liveKey, "/limit", { enabled: false });
    const results = await Promise.all(
      Array.from({ length: 30 }, () =>
        call("POST", "/api/v1/webhook-endpoints", org.liveKey, { url: receiver.url("/limit") }),
      ),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(MAX_ENDPOINTS - 1);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused).toHaveLength(30 - (MAX_ENDPOINTS - 1));
    for (const r of refused) expect(`${r.status} ${r.body.error.code}`).toBe("400 too_many_endpoints");
    const [row] = await ctx.deps.sql<{ n: number }[]>`
      select count(*)::int as n from webhook_endpoints where organization_id = ${org.org.id} and livemode`;
    expect(row!.n).toBe(MAX_ENDPOINTS);
    await createEndpoint(org.testKey, "/limit");
    // Deleting one makes room for one.
    const list = await call("GET", "/api/v1/webhook-endpoints?limit=1", org.liveKey);
    await call("DELETE", `/api/v1/webhook-endpoints/${list.body.data[0].id}`, org.liveKey);
    await createEndpoint(org.liveKey, "/limit");
  });
});

describe("keys restricted to some agents", () => {
  test("every webhook operation is 403 agent_not_allowed, documented so", async () => {
    const restricted = await createSecretKey(ctx.deps, seed.org.id, {
      mode: "live",
      scopes: ["*"],
      agentIds: [seed.agent.id],
    });
    const webhookOps = operations(await fetchDocument(ctx)).filter(
      (o) => o.path.startsWith("/api/v1/webhook-endpoints") || o.path.endsWith("/redeliver"),
    );
    expect(webhookOps.length).toBe(8);
    for (const o of webhookOps) {
      const body = jsonBodyOf(o.op) ? { url: receiver.url("/restricted") } : undefined;
      const res = await call(o.method.toUpperCase(), concretePath(o.path, o.op), restricted.key, body);
      expect(`${o.label} ${res.status} ${res.body.error?.code}`).toBe(`${o.label} 403 agent_not_allowed`);
      expect(Object.keys(o.op.responses)).toContain("403");
      expect((o.op as { description?: string }).description).toContain("restricted to some agents");
    }
    const [row] = await ctx.deps.sql<{ n: number }[]>`
      select count(*)::int as n from webhook_endpoints where url like '%/restricted'`;
    expect(row!.n).toBe(0);
  });
});
