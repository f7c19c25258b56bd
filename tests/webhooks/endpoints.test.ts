import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { EVENT_TYPES } from "../../src/services/events.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { isPrivateHost, parseIPv6 } from "../../src/services/webhookUrls.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/**
 * Webhook endpoint management: create (secret once), list (never the secret), delete, URL rules; each
 * mode sees its own endpoints.
 */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

const create = (json: unknown, key = seed.liveKey, c = ctx) =>
  c.request("/api/v1/webhook-endpoints", { method: "POST", key, json });
const list = async (key: string) =>
  (await (await ctx.request("/api/v1/webhook-endpoints?limit=100", { key })).json()) as {
    data: {
      id: string;
      livemode: boolean;
      url: string;
      events: string[];
      enabled: boolean;
      createdAt: string;
    }[];
    has_more: boolean;
  };

describe("create and list", () => {
  test("POST answers 201 with the secret, shown once; all event types when events is omitted", async () => {
    const res = await create({ url: "https://hooks.example.com/voice" });
    expect(res.status).toBe(201);
    const e = await res.json();
    expect(e).toEqual({
      id: expect.stringMatching(/^we_[0-9A-HJKMNP-TV-Z]{26}$/),
      livemode: true,
      url: "https://hooks.example.com/voice",
      events: [...EVENT_TYPES],
      enabled: true,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(Buffer.from(e.secret.slice("whsec_".length), "base64").length).toBe(32);
    // Kept for signing, never logged, never listed.
    const [row] = await ctx.deps.sql`select secret, events from webhook_endpoints where id = ${e.id}`;
    expect(row!.secret).toBe(e.secret);
    expect(row!.events).toBeNull();
    expect(ctx.logs.join("\n")).not.toContain(e.secret.slice(6));
    const listed = await list(seed.liveKey);
    const { secret: _, ...shown } = e;
    expect(listed.data[0]).toEqual(shown);
    expect(JSON.stringify(listed)).not.toContain("whsec_");
  });

  test("events are deduplicated; each endpoint gets its own secret", async () => {
    const a = await (
      await create({ url: "https://a.example.com/h", events: ["call.ended", "call.started", "call.ended"] })
    ).json();
    expect(a.events).toEqual(["call.started", "call.ended"]);
    const b = await (await create({ url: "https://a.example.com/h", events: ["contact.deleted"] })).json();
    expect(b.secret).not.toBe(a.secret);
    expect(b.id).not.toBe(a.id);
  });

  test("each mode sees only its own endpoints; another organization sees none", async () => {
    const t = await (await create({ url: "https://test.example.com/h" }, seed.testKey)).json();
    expect(t.livemode).toBe(false);
    const live = await list(seed.liveKey);
    const test = await list(seed.testKey);
    expect(test.data.map((e) => e.id)).toEqual([t.id]);
    expect(live.data.map((e) => e.id)).not.toContain(t.id);
    expect(live.data.every((e) => e.livemode)).toBe(true);
    expect((await list(other.liveKey)).data).toEqual([]);
    expect((await list(other.testKey)).data).toEqual([]);
  });

  test("the list follows the cursor convention, newest first", async () => {
    const all = (await list(seed.liveKey)).data.map((e) => e.id);
    expect(all.length).toBe(3);
    const p1 = await (await ctx.request("/api/v1/webhook-endpoints?limit=2", { key: seed.liveKey })).json();
    expect(p1.has_more).toBe(true);
    const p2 = await (
      await ctx.request(`/api/v1/webhook-endpoints?limit=2&starting_after=${p1.data[1].id}`, {
        key: seed.liveKey,
      })
    ).json();
    expect([...p1.data, ...p2.data].map((e: { id: string }) => e.id)).toEqual(all);
    expect(p2.has_more).toBe(false);
  });
});

describe("delete", () => {
  test("DELETE answers {id, deleted: true}; then 404, gone from the list, an invalid cursor", async () => {
    const e = await (await create({ url: "https://gone.example.com/h" })).json();
    // The other mode's key does not see it.
    const otherMode = await ctx.request(`/api/v1/webhook-endpoints/${e.id}`, {
      method: "DELETE",
      key: seed.testKey,
    });
    expect(otherMode.status).toBe(404);
    const res = await ctx.request(`/api/v1/webhook-endpoints/${e.id}`, {
      method: "DELETE",
      key: seed.liveKey,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: e.id, deleted: true });
    const again = await ctx.request(`/api/v1/webhook-endpoints/${e.id}`, {
      method: "DELETE",
      key: seed.liveKey,
    });
    await expectApiError(again, 404, "not_found");
    expect((await list(seed.liveKey)).data.map((x) => x.id)).not.toContain(e.id);
    const cursor = await ctx.request(`/api/v1/webhook-endpoints?starting_after=${e.id}`, {
      key: seed.liveKey,
    });
    await expectApiError(cursor, 400, "invalid_cursor", { param: "starting_after" });
  });

  test("another organization's endpoint, a malformed or unknown id: 404, nothing deleted", async () => {
    const mine = await (await create({ url: "https://mine.example.com/h" })).json();
    for (const id of [mine.id, "we_x", "abc", "we_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", seed.agent.id]) {
      const res = await ctx.request(`/api/v1/webhook-endpoints/${id}`, {
        method: "DELETE",
        key: other.liveKey,
      });
      await expectApiError(res, 404, "not_found");
    }
    expect((await list(seed.liveKey)).data.map((x) => x.id)).toContain(mine.id);
  });
});

describe("validation: 400 invalid_request with param", () => {
  const refused = [
    "http://hooks.example.com/h",
    "ftp://hooks.example.com/h",
    "javascript:alert(1)",
    "hooks.example.com/h",
    "/relative",
    "",
    "https://",
    "https://localhost/h",
    "https://LOCALHOST./h",
    "https://api.localhost/h",
    "https://127.0.0.1/h",
    "https://127.1.2.3:8443/h",
    "https://2130706433/h",
    "https://0x7f.0.0.1/h",
    "https://0.0.0.0/h",
    "https://10.1.2.3/h",
    "https://172.16.0.1/h",
    "https://172.31.255.255/h",
    "https://192.168.1.1/h",
    "https://169.254.169.254/latest/meta-data",
    "https://100.64.0.1/h",
    "https://224.0.0.1/h",
    "https://255.255.255.255/h",
    "https://[::1]/h",
    "https://[::]/h",
    "https://[fe80::1]/h",
    "https://[fc00::1]/h",
    "https://[fd12:3456::1]/h",
    "https://[ff02::1]/h",
    "https://[::ffff:127.0.0.1]/h",
    "https://[::ffff:10.0.0.1]/h",
    "https://[64:ff9b::192.168.0.1]/h",
    "https://user:pass@hooks.example.com/h",
    "https://hooks.example.com:0/h",
    `https://hooks.example.com/${"a".repeat(2100)}`,
  ];

  test("refused URLs while private URLs are not allowed", async () => {
    for (const url of refused) {
      await expectApiError(await create({ url }), 400, "invalid_request", { param: "url", label: url });
    }
  });

  test("public https URLs are accepted, literal public addresses included", async () => {
    for (const url of [
      "https://hooks.example.com:8443/a/b?x=1",
      "https://93.184.216.34/h",
      "https://172.32.0.1/h",
      "https://[2606:4700:4700::1111]/h",
      "https://[::ffff:8.8.8.8]/h",
    ]) {
      const res = await create({ url });
      expect({ url, status: res.status }).toEqual({ url, status: 201 });
    }
  });

  test("url and events of the wrong type or value", async () => {
    const cases: [unknown, string | undefined][] = [
      [{}, "url"],
      [{ url: 5 }, "url"],
      [{ url: null }, "url"],
      [{ url: "https://a.example.com/h", events: [] }, "events"],
      [{ url: "https://a.example.com/h", events: "call.started" }, "events"],
      [{ url: "https://a.example.com/h", events: ["call.nope"] }, "events.0"],
      [{ url: "https://a.example.com/h", events: ["call.started", 3] }, "events.1"],
      [{ url: "https://a.example.com/h", events: ["*"] }, "events.0"],
      [{ url: "https://a.example.com/h", secret: "whsec_mine" }, "secret"],
      [[], undefined],
    ];
    for (const [json, param] of cases) {
      await expectApiError(await create(json), 400, "invalid_request", {
        param,
        label: JSON.stringify(json),
      });
    }
  });
});

describe("WEBHOOK_ALLOW_PRIVATE_URLS=true", () => {
  let dev: TestContext;
  let devSeed: Awaited<ReturnType<typeof seedOrganization>>;
  beforeAll(async () => {
    dev = await createTestContext({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
    devSeed = await seedOrganization(dev);
  });
  afterAll(() => dev.close());

  test("http and private targets are accepted; other schemes still are not", async () => {
    for (const url of [
      "http://127.0.0.1:9999/hook",
      "http://localhost:3000/h",
      "https://[::1]/h",
      "https://10.0.0.5/h",
    ]) {
      const res = await create({ url }, devSeed.testKey, dev);
      expect({ url, status: res.status }).toEqual({ url, status: 201 });
    }
    for (const url of ["ftp://127.0.0.1/h", "file:///etc/passwd", "ws://127.0.0.1/h"]) {
      const res = await create({ url }, devSeed.testKey, dev);
      expect({ url, status: res.status }).toEqual({ url, status: 400 });
    }
  });
});

describe("keys and scopes", () => {
  test("webhooks:read lists, webhooks:write creates and deletes; no key is 401", async () => {
    const c = ctx.deps;
    const reader = await createSecretKey(c, seed.org.id, { mode: "live", scopes: ["webhooks:read"] });
    const writer = await createSecretKey(c, seed.org.id, { mode: "test", scopes: ["webhooks:write"] });
    expect((await ctx.request("/api/v1/webhook-endpoints", { key: reader.key })).status).toBe(200);
    expect((await ctx.request("/api/v1/webhook-endpoints", { key: writer.key })).status).toBe(403);
    expect((await create({ url: "https://w.example.com/h" }, reader.key)).status).toBe(403);
    const made = await create({ url: "https://w.example.com/h" }, writer.key);
    expect(made.status).toBe(201);
    const { id } = await made.json();
    const byReader = await ctx.request(`/api/v1/webhook-endpoints/${id}`, {
      method: "DELETE",
      key: reader.key,
    });
    await expectApiError(byReader, 403, "missing_scope");
    for (const [method, path] of [
      ["GET", "/api/v1/webhook-endpoints"],
      ["POST", "/api/v1/webhook-endpoints"],
      ["DELETE", `/api/v1/webhook-endpoints/${id}`],
    ] as const) {
      const res = await ctx.request(path, {
        method,
        json: method === "POST" ? { url: "https://x.example.com" } : undefined,
      });
      await expectApiError(res, 401, "invalid_key");
    }
    const byWriter = await ctx.request(`/api/v1/webhook-endpoints/${id}`, {
      method: "DELETE",
      key: writer.key,
    });
    expect(byWriter.status).toBe(200);
  });
});

describe("address parsing", () => {
  test("IPv6 forms", () => {
    expect(parseIPv6("::1")).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    expect(parseIPv6("fe80::")).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 0]);
    expect(parseIPv6("1:2:3:4:5:6:7:8")).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(parseIPv6("::ffff:7f00:1")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x7f00, 1]);
    expect(parseIPv6("::ffff:127.0.0.1")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x7f00, 1]);
    for (const bad of ["1::2::3", "1:2:3", "12345::", "g::1", "1:2:3:4:5:6:7:8:9", "::1.2.3.256"]) {
      expect(parseIPv6(bad)).toBeNull();
    }
  });

  test("hosts", () => {
    for (const h of [
      "localhost",
      "a.b.localhost",
      "127.0.0.1",
      "[::1]",
      "[::ffff:7f00:1]",
      "[::7f00:1]",
      "[fec0::1]",
    ]) {
      expect({ h, private: isPrivateHost(h) }).toEqual({ h, private: true });
    }
    for (const h of ["example.com", "localhost.example.com", "8.8.8.8", "[2001:4860:4860::8888]", "1.2.3"]) {
      expect({ h, private: isPrivateHost(h) }).toEqual({ h, private: false });
    }
  });
});
