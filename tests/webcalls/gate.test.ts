import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { OpenAPIHono } from "@hono/zod-openapi";
import { defaultHook } from "../../src/app.ts";
import { ManualClock } from "../../src/clock.ts";
import type { Deps } from "../../src/deps.ts";
import { parseEnv } from "../../src/env.ts";
import { ApiError, type ErrorCode, errorResponse, errorStatus, onError } from "../../src/errors.ts";
import type { AppEnv } from "../../src/http/appEnv.ts";
import { BODY_LIMIT, jsonBody } from "../../src/http/body.ts";
import { requestContext } from "../../src/http/requestId.ts";
import { webCallGate } from "../../src/http/webCallGate.ts";
import { registerListAgents } from "../../src/routes/agents/list.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/**
 * The gate of `POST /api/v1/web-calls` (CORS, then the rate limit) on a throwaway app built in the same
 * order as createApp: request context → gate → body middleware → routes → onError.
 */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

function throwawayApp(deps: Deps) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook });
  app.use("*", requestContext(deps));
  app.use("/api/v1/web-calls", ...webCallGate(deps));
  app.use(
    "/api/*",
    jsonBody(() => BODY_LIMIT),
  );
  app.post("/api/v1/web-calls", async (c) => {
    const body = (await c.req.json()) as { fail?: ErrorCode };
    if (body.fail) throw new ApiError(body.fail, "refused");
    // As the real route does: the hit is counted before anything with an effect.
    await c.get("webCallRateLimit").settle();
    return c.json({ started: true }, 201);
  });
  registerListAgents(app, deps);
  app.notFound((c) => errorResponse(c, new ApiError("not_found", "No route.")));
  app.onError(onError(deps.log));
  return app;
}

let app: ReturnType<typeof throwawayApp>;
let proxied: ReturnType<typeof throwawayApp>;

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx);
  app = throwawayApp(ctx.deps);
  proxied = throwawayApp({ ...ctx.deps, env: parseEnv({ TRUST_PROXY: "10.0.0.0/8, fd00::/8" }) });
});
afterAll(() => ctx.close());

function post(
  a: typeof app,
  peer: string,
  opts: { origin?: string; body?: string; type?: string | null; headers?: Record<string, string> } = {},
) {
  const headers = new Headers(opts.headers);
  if (opts.origin !== undefined) headers.set("origin", opts.origin);
  if (opts.type !== null) headers.set("content-type", opts.type ?? "application/json");
  return a.request(
    "/api/v1/web-calls",
    { method: "POST", headers, body: opts.body ?? "{}" },
    { remoteAddress: peer },
  );
}

const ORIGIN = "https://any-site.example.org";

describe("CORS on /api/v1/web-calls", () => {
  test("the preflight allows any origin: POST with content-type", async () => {
    for (const origin of [ORIGIN, "https://other.example.com", "http://localhost:3000"]) {
      const res = await app.request(
        "/api/v1/web-calls",
        {
          method: "OPTIONS",
          headers: {
            origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type",
          },
        },
        { remoteAddress: "192.0.2.1" },
      );
      expect(res.status).toBe(204);
      expect(res.headers.get("access-control-allow-origin")).toBe(origin);
      expect(res.headers.get("access-control-allow-methods")).toContain("POST");
      expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("content-type");
      expect(res.headers.get("vary")).toContain("Origin");
      expect(res.headers.get("x-request-id")).toMatch(/^req_/);
    }
  });

  test("a success carries the request's origin, Vary: Origin and the readable headers", async () => {
    const res = await post(app, "192.0.2.2", { origin: ORIGIN });
    expect(res.status).toBe(201);
    expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(res.headers.get("vary")).toContain("Origin");
    expect(res.headers.get("access-control-expose-headers")).toContain("Retry-After");
  });

  test("errors of the route carry it too, so the widget can read the code", async () => {
    for (const fail of [
      "invalid_session_token",
      "origin_not_allowed",
      "agent_unavailable",
      "internal_error",
    ] as const) {
      const res = await post(app, "192.0.2.3", { origin: ORIGIN, body: JSON.stringify({ fail }) });
      expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
      await expectApiError(res, errorStatus[fail], fail);
    }
  });

  test("errors raised before the route (415, malformed JSON, 413) carry it too", async () => {
    const untyped = await post(app, "192.0.2.4", { origin: ORIGIN, type: null, body: "{}" });
    expect(untyped.status).toBe(415);
    expect(untyped.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    const malformed = await post(app, "192.0.2.4", { origin: ORIGIN, body: "{oops" });
    expect(malformed.status).toBe(400);
    expect(malformed.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    const huge = await post(app, "192.0.2.4", {
      origin: ORIGIN,
      body: JSON.stringify({ x: "y".repeat(70_000) }),
    });
    expect(huge.status).toBe(413);
    expect(huge.headers.get("access-control-allow-origin")).toBe(ORIGIN);
  });

  test("secret-key routes have no CORS at all", async () => {
    const res = await app.request(
      "/api/v1/agents",
      { headers: { origin: ORIGIN, authorization: `Bearer ${seed.liveKey}` } },
      { remoteAddress: "192.0.2.5" },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const preflight = await app.request(
      "/api/v1/agents",
      { method: "OPTIONS", headers: { origin: ORIGIN, "access-control-request-method": "GET" } },
      { remoteAddress: "192.0.2.5" },
    );
    expect(preflight.status).not.toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("rate limit on /api/v1/web-calls", () => {
  test("every request counts, malformed or not; the seventh is 429 rate_limited with Retry-After and CORS", async () => {
    const peer = "192.0.2.10";
    const answers = [
      await post(app, peer, { origin: ORIGIN, body: "{oops" }),
      await post(app, peer, { origin: ORIGIN, type: null }),
      await post(app, peer, { origin: ORIGIN, body: JSON.stringify({ fail: "invalid_session_token" }) }),
      await post(app, peer, { origin: ORIGIN, body: JSON.stringify({ fail: "invalid_captcha" }) }),
      await post(app, peer, {}),
      await post(app, peer, { origin: ORIGIN }),
    ];
    expect(answers.map((r) => r.status)).toEqual([400, 415, 401, 400, 201, 201]);
    clock.advance(90_000);
    const limited = await post(app, peer, { origin: ORIGIN });
    await expectApiError(limited, 429, "rate_limited");
    expect(limited.headers.get("retry-after")).toBe("510");
    expect(limited.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    // Answers the route gives without counting (malformed, refused) are replaced by the 429 too.
    for (const opts of [{ body: "{oops" }, { body: JSON.stringify({ fail: "invalid_session_token" }) }]) {
      const res = await post(app, peer, { origin: ORIGIN, ...opts });
      await expectApiError(res, 429, "rate_limited");
      expect(res.headers.get("retry-after")).toBe("510");
      expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
      expect(res.headers.get("x-request-id")).toMatch(/^req_/);
    }
  });

  test("preflights do not count", async () => {
    const peer = "192.0.2.11";
    for (let i = 0; i < 10; i++) {
      await app.request(
        "/api/v1/web-calls",
        { method: "OPTIONS", headers: { origin: ORIGIN } },
        { remoteAddress: peer },
      );
    }
    expect((await post(app, peer, { origin: ORIGIN })).status).toBe(201);
  });

  test("without TRUST_PROXY a spoofed X-Forwarded-For changes nothing", async () => {
    const peer = "203.0.113.50";
    for (let i = 0; i < 6; i++) {
      const res = await post(app, peer, {
        origin: ORIGIN,
        headers: { "x-forwarded-for": `198.51.100.${i}` },
      });
      expect(res.status).toBe(201);
    }
    const res = await post(app, peer, { origin: ORIGIN, headers: { "x-forwarded-for": "198.51.100.99" } });
    expect(res.status).toBe(429);
  });

  test("IPv6 visitors are counted per /64: new interface ids in one /64 share one budget", async () => {
    for (let i = 1; i <= 6; i++) {
      expect((await post(app, `2001:db8:60:1::${i.toString(16)}`, { origin: ORIGIN })).status).toBe(201);
    }
    const sameSlash64 = await post(app, "2001:db8:60:1:ffff:ffff:ffff:ffff", { origin: ORIGIN });
    expect(sameSlash64.status).toBe(429);
    expect((await sameSlash64.json()).error.code).toBe("rate_limited");
    // The next /64 of the same /48 is another visitor.
    expect((await post(app, "2001:db8:60:2::1", { origin: ORIGIN })).status).toBe(201);
  });

  test("an IPv4 visitor seen as IPv4-mapped IPv6 shares the IPv4 address's budget", async () => {
    for (let i = 0; i < 6; i++) {
      const peer = i % 2 ? "198.51.100.80" : "::ffff:198.51.100.80";
      expect((await post(app, peer, { origin: ORIGIN })).status).toBe(201);
    }
    expect((await post(app, "::ffff:c633:6450", { origin: ORIGIN })).status).toBe(429);
    expect((await post(app, "198.51.100.81", { origin: ORIGIN })).status).toBe(201);
  });

  test("behind a trusted IPv6 proxy the forwarded visitor is counted per /64", async () => {
    for (let i = 1; i <= 6; i++) {
      const res = await post(proxied, `fd00::${i}`, {
        headers: { "x-forwarded-for": `2001:db8:61:1::${i}` },
      });
      expect(res.status).toBe(201);
    }
    const res = await post(proxied, "fd00::9", { headers: { "x-forwarded-for": "2001:db8:61:1::abcd" } });
    expect(res.status).toBe(429);
  });

  test("with TRUST_PROXY the visitor's address behind the proxy is counted", async () => {
    for (let i = 0; i < 6; i++) {
      const res = await post(proxied, "10.0.0.1", {
        origin: ORIGIN,
        headers: { "x-forwarded-for": `1.1.1.${i}, 198.51.100.60` },
      });
      expect(res.status).toBe(201);
    }
    const same = await post(proxied, "10.0.0.2", { headers: { "x-forwarded-for": "198.51.100.60" } });
    expect(same.status).toBe(429);
    const other = await post(proxied, "10.0.0.1", { headers: { "x-forwarded-for": "198.51.100.61" } });
    expect(other.status).toBe(201);
    // A peer that is not a trusted proxy is counted as itself, whatever it forwards.
    for (let i = 0; i < 6; i++) {
      await post(proxied, "203.0.113.70", { headers: { "x-forwarded-for": `198.51.100.${70 + i}` } });
    }
    expect(
      (await post(proxied, "203.0.113.70", { headers: { "x-forwarded-for": "198.51.100.99" } })).status,
    ).toBe(429);
    expect(
      (await post(proxied, "10.0.0.1", { headers: { "x-forwarded-for": "198.51.100.70" } })).status,
    ).toBe(201);
  });
});
