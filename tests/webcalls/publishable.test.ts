import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { updateAgent } from "../../src/services/agents.ts";
import { revokePublishableKey } from "../../src/services/keys.ts";
import { usedMinutes } from "../../src/services/minutes.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import {
  freshAddress,
  type Seed,
  seedOrganization,
  startCall,
  startWorld,
  type WebCallWorld,
} from "./support.ts";

/**
 * POST /api/v1/web-calls with a publishable key, and the order of its checks: rate limit → key →
 * Origin in the key's list → bot check → paid plan → agent active → plan minutes → minute cap → start.
 */

let w: WebCallWorld;
let seed: Seed;
let tokens = 0;

beforeAll(async () => {
  w = await startWorld();
  seed = await seedOrganization(w.ctx, { cap: 100, planMinutes: 1000 });
});
afterAll(() => w.close());

const c = () => w.ctx.deps;
/** A bot-check token the fake verifier accepts (once), for `hostname`. */
const good = (hostname = "shop.example.com") => w.captcha.token(`good-${++tokens}`, { hostname });
const bad = () => w.captcha.token(`bad-${++tokens}`, { success: false });
const WRONG_KEY = "inf_pub_0123456789012345678901234567890123456789012";

describe("a publishable key from an allowed website", () => {
  test("starts a live call: room, dispatch without variables, cap reserved, CORS for the origin", async () => {
    const address = freshAddress();
    const from = w.liveKit.requests.length;
    const verified = w.captcha.requests.length;
    const res = await startCall(
      w.ctx,
      { publishableKey: seed.publishable.key, captchaToken: good() },
      { address },
    );
    expect(res.status).toBe(201);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://shop.example.com");
    const body = await res.json();
    expect(body).toMatchObject({ livemode: true, maxSeconds: 600, room: { name: body.callId } });
    expect(w.liveKit.requests.slice(from).map((r) => r.method)).toEqual(["CreateRoom", "CreateDispatch"]);
    expect(JSON.parse(String(w.liveKit.dispatches.at(-1)!.metadata))).toEqual({
      callId: body.callId,
      variables: {},
    });
    // The bot check got the resolved client address, the secret and the token.
    const asked = w.captcha.requests.slice(verified);
    expect(asked.length).toBe(1);
    expect(asked[0]!.remoteip).toBe(address);
    const [reservation] = await w.ctx.deps.sql`
      select reserved_minutes, publishable_key_id from minute_reservations where call_id = ${body.callId}`;
    expect(reservation).toEqual({ reserved_minutes: 10, publishable_key_id: seed.publishable.id });
    // The key is not in the answer, nor in the logs.
    expect(JSON.stringify(body)).not.toContain(seed.publishable.key);
    expect(w.ctx.logs.join("\n")).not.toContain(seed.publishable.key);
  });

  test("maxSeconds is what remains of the key's cap when that is shorter", async () => {
    const org = await seedOrganization(w.ctx, { cap: 3 });
    const res = await startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() });
    expect(res.status).toBe(201);
    expect((await res.json()).maxSeconds).toBe(180);
    const res2 = await startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() });
    await expectApiError(res2, 429, "minute_cap_reached");
    const retry = Number(res2.headers.get("retry-after"));
    const now = new Date();
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    expect(Math.abs(retry - (nextMonth - now.getTime()) / 1000)).toBeLessThan(5);
    expect(res2.headers.get("access-control-allow-origin")).toBe("https://shop.example.com");
  });

  test("15 parallel calls never reserve more than the cap", async () => {
    const org = await seedOrganization(w.ctx, { cap: 25 });
    const codes = await Promise.all(
      Array.from({ length: 15 }, () =>
        startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() }).then(outcomeOf),
      ),
    );
    // 10 + 10 + 5 minutes: three calls, then the cap is used up.
    expect(codes.filter((x) => x === "201 ok").length).toBe(3);
    expect(codes.filter((x) => x === "429 minute_cap_reached").length).toBe(12);
    const used = await usedMinutes(w.ctx.deps.sql, w.ctx.deps.clock, {
      publishableKeyId: org.publishable.id,
    });
    expect(used).toBe(25);
  });
});

describe("each refusal, in the order of checks", () => {
  test("a wrong, malformed or revoked key is 401 invalid_key", async () => {
    for (const key of [WRONG_KEY, "nope", "", seed.liveKey]) {
      await expectApiError(
        await startCall(w.ctx, { publishableKey: key, captchaToken: good() }),
        401,
        "invalid_key",
      );
    }
    const org = await seedOrganization(w.ctx);
    await revokePublishableKey(c(), org.publishable.id);
    const res = await startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() });
    await expectApiError(res, 401, "invalid_key");
  });

  test("a wrong key from a wrong origin is 401 (the key comes first)", async () => {
    const res = await startCall(
      w.ctx,
      { publishableKey: WRONG_KEY, captchaToken: bad() },
      { origin: "https://evil.example" },
    );
    await expectApiError(res, 401, "invalid_key");
    expect(res.headers.get("access-control-allow-origin")).toBe("https://evil.example");
  });

  test.each([
    ["another website", "https://evil.example"],
    ["another scheme", "http://shop.example.com"],
    ["another port", "https://shop.example.com:8443"],
    ["a subdomain", "https://www.shop.example.com"],
    ["the opaque origin", "null"],
  ])("an Origin of %s is 403 origin_not_allowed", async (_name, origin) => {
    const res = await startCall(
      w.ctx,
      { publishableKey: seed.publishable.key, captchaToken: good() },
      { origin },
    );
    await expectApiError(res, 403, "origin_not_allowed");
  });

  test("no Origin header is 403 origin_not_allowed", async () => {
    const res = await startCall(
      w.ctx,
      { publishableKey: seed.publishable.key, captchaToken: good() },
      { origin: null },
    );
    await expectApiError(res, 403, "origin_not_allowed");
  });

  test("a bad origin with a bad bot-check token is 403 (the origin comes before the bot check)", async () => {
    const verified = w.captcha.requests.length;
    const res = await startCall(
      w.ctx,
      { publishableKey: seed.publishable.key, captchaToken: bad() },
      { origin: "https://evil.example" },
    );
    await expectApiError(res, 403, "origin_not_allowed");
    expect(w.captcha.requests.length).toBe(verified);
  });

  test.each([
    ["missing", () => undefined],
    ["refused by the verifier", () => bad()],
    ["with a low score", () => w.captcha.token(`low-${++tokens}`, { score: 0.1 })],
    ["for another action", () => w.captcha.token(`act-${++tokens}`, { action: "login" })],
    ["for another hostname than the Origin", () => good("evil.example")],
  ])("a bot-check token %s is 400 invalid_captcha", async (_name, token) => {
    const json: Record<string, unknown> = { publishableKey: seed.publishable.key };
    const t = token();
    if (t !== undefined) json.captchaToken = t;
    await expectApiError(await startCall(w.ctx, json), 400, "invalid_captcha");
  });

  test("a bot-check token is judged by the verifier each time: refused as a duplicate, or accepted again", async () => {
    const once = good();
    const json = { publishableKey: seed.publishable.key, captchaToken: once };
    expect((await startCall(w.ctx, json)).status).toBe(201);
    // The verifier answers a token it has seen `success: false`: the second start is refused.
    await expectApiError(await startCall(w.ctx, json), 400, "invalid_captcha");
    // A verifier that accepts it again is believed (the service keeps no tokens of its own).
    const again = w.captcha.token(`reuse-${++tokens}`, { reusable: true });
    for (let i = 0; i < 2; i++) {
      const res = await startCall(w.ctx, { publishableKey: seed.publishable.key, captchaToken: again });
      expect(res.status).toBe(201);
    }
  });

  test("a failed bot check with no paid plan is 400 (the bot check comes before the plan)", async () => {
    const org = await seedOrganization(w.ctx, { paidPlan: false });
    const res = await startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: bad() });
    await expectApiError(res, 400, "invalid_captcha");
    await expectApiError(
      await startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() }),
      403,
      "plan_required",
    );
  });

  test("no paid plan with an inactive agent is 403 plan_required, then the agent is 503", async () => {
    const org = await seedOrganization(w.ctx, { paidPlan: false, agentActive: false });
    const key = org.publishable.key;
    await expectApiError(
      await startCall(w.ctx, { publishableKey: key, captchaToken: good() }),
      403,
      "plan_required",
    );
    await updateOrganization(c(), org.org.id, { paidPlan: true, planMinutes: 0 });
    await expectApiError(
      await startCall(w.ctx, { publishableKey: key, captchaToken: good() }),
      503,
      "agent_unavailable",
    );
    await updateAgent(c(), org.agent.id, { active: true });
    await expectApiError(
      await startCall(w.ctx, { publishableKey: key, captchaToken: good() }),
      403,
      "plan_minutes_exhausted",
    );
  });

  test("plan minutes come before the key's cap", async () => {
    const org = await seedOrganization(w.ctx, { planMinutes: 0, cap: 1 });
    await w.ctx.deps.sql`
      insert into minute_usage (kind, subject_id, month, used_minutes)
      values ('key', ${org.publishable.id}, date_trunc('month', now() at time zone 'utc')::date, 1)`;
    const res = await startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() });
    await expectApiError(res, 403, "plan_minutes_exhausted");
  });

  test("a media-server failure is 502 call_start_failed and returns the reserved minutes", async () => {
    const org = await seedOrganization(w.ctx, { cap: 50 });
    w.liveKit.fail("CreateRoom");
    let res: Response;
    try {
      res = await startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() });
    } finally {
      w.liveKit.fail("CreateRoom", null);
    }
    await expectApiError(res, 502, "call_start_failed");
    expect(res.headers.get("access-control-allow-origin")).toBe("https://shop.example.com");
    expect(
      await usedMinutes(w.ctx.deps.sql, w.ctx.deps.clock, { publishableKeyId: org.publishable.id }),
    ).toBe(0);
  });

  test("with the bot check not configured, the publishable form is 400 invalid_captcha", async () => {
    const bare = await startWorld({ env: { RECAPTCHA_SECRET: "" } });
    try {
      const org = await seedOrganization(bare.ctx);
      const token = bare.captcha.token("would-pass");
      const res = await startCall(bare.ctx, { publishableKey: org.publishable.key, captchaToken: token });
      await expectApiError(res, 400, "invalid_captcha");
      expect(bare.captcha.requests.length).toBe(0);
    } finally {
      await bare.close();
    }
  });

  test("without a media server, the publishable form is 503 agent_unavailable", async () => {
    const bare = await startWorld({ liveKit: false });
    try {
      const org = await seedOrganization(bare.ctx);
      const token = bare.captcha.token("passes");
      const res = await startCall(bare.ctx, { publishableKey: org.publishable.key, captchaToken: token });
      await expectApiError(res, 503, "agent_unavailable");
    } finally {
      await bare.close();
    }
  });

  test.each([
    ["a non-string key", { publishableKey: 1, captchaToken: "x" }, "publishableKey"],
    ["a non-string bot-check token", { publishableKey: WRONG_KEY, captchaToken: true }, "captchaToken"],
    ["a bot-check token alone", { captchaToken: "x" }, "publishableKey"],
  ])("%s is 400 invalid_request", async (_name, json, param) => {
    await expectApiError(await startCall(w.ctx, json), 400, "invalid_request", { param });
  });
});

describe("CORS and the rate limit", () => {
  test("the preflight allows any origin and is not rate limited", async () => {
    const address = freshAddress();
    for (let i = 0; i < 8; i++) {
      const res = await w.ctx.request("/api/v1/web-calls", {
        method: "OPTIONS",
        headers: {
          origin: "https://anywhere.example.org",
          "access-control-request-method": "POST",
          "access-control-request-headers": "content-type",
        },
        remoteAddress: address,
      });
      expect(res.status).toBe(204);
      expect(res.headers.get("access-control-allow-origin")).toBe("https://anywhere.example.org");
      expect(res.headers.get("access-control-allow-methods")).toContain("POST");
      expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("content-type");
    }
    const res = await startCall(w.ctx, { publishableKey: WRONG_KEY, captchaToken: "x" }, { address });
    await expectApiError(res, 401, "invalid_key");
  });

  test("every request counts, malformed ones too; the 7th is 429 with Retry-After and CORS", async () => {
    const address = freshAddress();
    const sent = [
      startCall(w.ctx, {}, { address }),
      w.ctx.request("/api/v1/web-calls", {
        method: "POST",
        body: "{not json",
        headers: { "content-type": "application/json", origin: "https://shop.example.com" },
        remoteAddress: address,
      }),
      w.ctx.request("/api/v1/web-calls", {
        method: "POST",
        body: "x",
        headers: { "content-type": "text/plain", origin: "https://shop.example.com" },
        remoteAddress: address,
      }),
    ];
    const first = await Promise.all(sent);
    expect(await Promise.all(first.map(outcomeOf))).toEqual([
      "400 invalid_request",
      "400 invalid_request",
      "415 unsupported_media_type",
    ]);
    for (const r of first)
      expect(r.headers.get("access-control-allow-origin")).toBe("https://shop.example.com");
    for (let i = 0; i < 3; i++)
      await startCall(w.ctx, { publishableKey: WRONG_KEY, captchaToken: "x" }, { address });
    const res = await startCall(
      w.ctx,
      { publishableKey: seed.publishable.key, captchaToken: good() },
      { address },
    );
    await expectApiError(res, 429, "rate_limited");
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(600);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://shop.example.com");
    // Another address is not affected.
    expect(
      (await startCall(w.ctx, { publishableKey: seed.publishable.key, captchaToken: good() })).status,
    ).toBe(201);
  });
});

describe("an IPv6 visitor", () => {
  test("the bot check gets the full address; the limit counts the visitor's /64", async () => {
    const org = await seedOrganization(w.ctx, { cap: 100, planMinutes: 1000 });
    const codes: string[] = [];
    for (let i = 1; i <= 7; i++) {
      const address = `2001:db8:77:1:${i}::${i}`;
      const res = await startCall(
        w.ctx,
        { publishableKey: org.publishable.key, captchaToken: good() },
        { address },
      );
      codes.push(await outcomeOf(res));
      if (res.status === 201) expect(w.captcha.requests.at(-1)!.remoteip).toBe(address);
    }
    expect(codes).toEqual([...Array(6).fill("201 ok"), "429 rate_limited"]);
  });
});

describe("behind a trusted proxy", () => {
  test("the bot check and the rate limit see the forwarded address, and only from the proxy", async () => {
    const proxied = await startWorld({ env: { TRUST_PROXY: "10.0.0.0/8" } });
    try {
      const org = await seedOrganization(proxied.ctx);
      const token = proxied.captcha.token("proxied-1");
      const res = await startCall(
        proxied.ctx,
        { publishableKey: org.publishable.key, captchaToken: token },
        { address: "10.1.2.3", headers: { "x-forwarded-for": "203.0.113.9, 10.9.9.9" } },
      );
      expect(res.status).toBe(201);
      expect(proxied.captcha.requests.at(-1)!.remoteip).toBe("203.0.113.9");
      // From a peer that is not a proxy, the header is ignored: the peer is the client.
      const direct = proxied.captcha.token("direct-1");
      await startCall(
        proxied.ctx,
        { publishableKey: org.publishable.key, captchaToken: direct },
        { address: "192.0.2.77", headers: { "x-forwarded-for": "203.0.113.10" } },
      );
      expect(proxied.captcha.requests.at(-1)!.remoteip).toBe("192.0.2.77");
      // Six more from the same forwarded visitor through the proxy: the 7th in all is refused.
      const codes: string[] = [];
      for (let i = 0; i < 6; i++) {
        const r = await startCall(
          proxied.ctx,
          {},
          { address: `10.0.0.${i + 1}`, headers: { "x-forwarded-for": "203.0.113.9" } },
        );
        codes.push(await outcomeOf(r));
      }
      expect(codes.slice(0, 5)).toEqual(Array(5).fill("400 invalid_request"));
      expect(codes[5]).toBe("429 rate_limited");
    } finally {
      await proxied.close();
    }
  });
});
