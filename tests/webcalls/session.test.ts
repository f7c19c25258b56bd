import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { updateAgent } from "../../src/services/agents.ts";
import { usedMinutes } from "../../src/services/minutes.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  freshAddress,
  jwtClaims,
  mintToken,
  type Seed,
  seedOrganization,
  startCall,
  startWorld,
  type WebCallWorld,
} from "./support.ts";

/**
 * POST /api/v1/web-calls with a session token: single use, valid 5 minutes, no bot check and no
 * website list; checked rate limit → token → paid plan (live only) → agent → plan minutes → start,
 * and only a failure while starting spends the token.
 */

let w: WebCallWorld;
let seed: Seed;

beforeAll(async () => {
  w = await startWorld({ timers: true });
  seed = await seedOrganization(w.ctx, { planMinutes: 1000 });
});
afterAll(() => w.close());

const c = () => w.ctx.deps;

describe("a test session token", () => {
  test("answers a simulated call that plays out and is readable with a test key; nothing is connected", async () => {
    const token = await mintToken(w.ctx, seed.testKey, seed.agent.id, { customer: "Ada" });
    const before = w.liveKit.requests.length;
    const res = await startCall(w.ctx, { sessionToken: token }, { origin: "https://anywhere.example.org" });
    expect(res.status).toBe(201);
    const body = await res.json();
    expect(Object.keys(body).sort()).toEqual(["callId", "livemode", "maxSeconds", "simulated"]);
    expect(body).toMatchObject({ simulated: true, livemode: false, maxSeconds: 600 });
    expect(body.callId).toMatch(/^call_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(w.liveKit.requests.length).toBe(before);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://anywhere.example.org");

    const read = await w.ctx.request(`/api/v1/calls/${body.callId}`, { key: seed.testKey });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ id: body.callId, livemode: false, direction: "web", to: null });
    expect((await w.ctx.request(`/api/v1/calls/${body.callId}`, { key: seed.liveKey })).status).toBe(404);
    const [row] = await w.ctx.deps.sql`select variables from calls where id = ${body.callId}`;
    expect(row!.variables).toEqual({ customer: "Ada" });

    // Plays as a simulated call (SIMULATION_TIME_SCALE 0.01): completed within seconds.
    await waitUntil(
      "the simulated call to complete",
      async () =>
        (await (await w.ctx.request(`/api/v1/calls/${body.callId}`, { key: seed.testKey })).json()).status ===
        "completed",
      { stepMs: 100 },
    );
    expect(await usedMinutes(w.ctx.deps.sql, w.ctx.deps.clock, { organizationId: seed.org.id })).toBe(0);
  });

  test("is spent by its call: a second use is 401 invalid_session_token", async () => {
    const token = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    expect((await startCall(w.ctx, { sessionToken: token })).status).toBe(201);
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 401, "invalid_session_token");
  });

  test("needs no paid plan but an active agent (503, token not spent)", async () => {
    const org = await seedOrganization(w.ctx, { paidPlan: false, planMinutes: 0 });
    const token = await mintToken(w.ctx, org.testKey, org.agent.id);
    await updateAgent(c(), org.agent.id, { active: false });
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 503, "agent_unavailable");
    await updateAgent(c(), org.agent.id, { active: true });
    expect(await outcomeOf(await startCall(w.ctx, { sessionToken: token }))).toBe("201 ok");
  });
});

describe("a live session token", () => {
  test("creates the room and dispatch with the real SDK and answers a room to join", async () => {
    const token = await mintToken(w.ctx, seed.liveKey, seed.agent.id, { orderId: 1042, vip: true });
    const from = w.liveKit.requests.length;
    const res = await startCall(w.ctx, { sessionToken: token });
    expect(res.status).toBe(201);
    const body = await res.json();
    expect(Object.keys(body).sort()).toEqual(["callId", "livemode", "maxSeconds", "room"]);
    expect(body.livemode).toBe(true);
    expect(body.maxSeconds).toBe(600);
    expect(body.room.name).toBe(body.callId);
    expect(body.room.serverUrl).toBe(w.liveKit.url.replace(/^http/, "ws"));
    expect(JSON.stringify(body)).not.toContain("1042");

    const made = w.liveKit.requests.slice(from);
    expect(made.map((r) => `${r.method} ${r.status}`)).toEqual(["CreateRoom 200", "CreateDispatch 200"]);
    expect(made[0]!.body.name).toBe(body.callId);
    const dispatch = made[1]!.body;
    expect(dispatch.room).toBe(body.callId);
    expect(dispatch.agentName).toBe(seed.agent.id);
    expect(JSON.parse(String(dispatch.metadata))).toEqual({
      callId: body.callId,
      variables: { orderId: 1042, vip: true },
    });

    const claims = jwtClaims(body.room.participantToken);
    expect(claims.iss).toBe(w.liveKit.apiKey);
    expect(claims.sub).toBe(`visitor-${body.callId}`);
    expect((claims.exp as number) - (claims.nbf as number)).toBeLessThanOrEqual(600);
    expect(claims.video).toEqual({ roomJoin: true, room: body.callId, canPublish: true, canSubscribe: true });

    const [call] = await w.ctx.deps.sql`
      select status, livemode, direction, variables from calls where id = ${body.callId}`;
    expect(call).toMatchObject({ status: "initiated", livemode: true, direction: "web" });
    expect(call!.variables).toEqual({ orderId: 1042, vip: true });
    const [timer] = await w.ctx.deps.sql`
      select extract(epoch from due_at - created_at)::float8 as secs from timers
      where kind = 'webcall.max_duration' and payload->>'callId' = ${body.callId}`;
    expect(Math.round(timer!.secs)).toBe(600);
    const [reservation] = await w.ctx.deps.sql`
      select reserved_minutes, publishable_key_id from minute_reservations where call_id = ${body.callId}`;
    expect(reservation).toEqual({ reserved_minutes: 10, publishable_key_id: null });
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 401, "invalid_session_token");
  });

  test("refusals (plan, agent, plan minutes) leave the token valid", async () => {
    const org = await seedOrganization(w.ctx, { paidPlan: true, planMinutes: 0 });
    const token = await mintToken(w.ctx, org.liveKey, org.agent.id);
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 403, "plan_minutes_exhausted");
    await updateOrganization(c(), org.org.id, { paidPlan: false, planMinutes: 5 });
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 403, "plan_required");
    await updateOrganization(c(), org.org.id, { paidPlan: true });
    await updateAgent(c(), org.agent.id, { active: false });
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 503, "agent_unavailable");
    await updateAgent(c(), org.agent.id, { active: true });
    const res = await startCall(w.ctx, { sessionToken: token });
    expect(res.status).toBe(201);
    expect((await res.json()).maxSeconds).toBe(300);
  });

  test("a media-server failure while starting is 502 call_start_failed and spends the token", async () => {
    const token = await mintToken(w.ctx, seed.liveKey, seed.agent.id);
    const used = await usedMinutes(w.ctx.deps.sql, w.ctx.deps.clock, { organizationId: seed.org.id });
    w.liveKit.fail("CreateDispatch");
    let res: Response;
    try {
      res = await startCall(w.ctx, { sessionToken: token });
    } finally {
      w.liveKit.fail("CreateDispatch", null);
    }
    await expectApiError(res, 502, "call_start_failed");
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 401, "invalid_session_token");
    // The call failed, its minutes went back, its room was removed and its timer dropped.
    const [call] = await w.ctx.deps.sql`
      select id, status from calls where direction = 'web' and livemode order by created_at desc, id desc limit 1`;
    expect(call!.status).toBe("failed");
    expect(w.liveKit.rooms.has(call!.id)).toBe(false);
    expect(await usedMinutes(w.ctx.deps.sql, w.ctx.deps.clock, { organizationId: seed.org.id })).toBe(used);
    const timers = await w.ctx.deps.sql`select 1 from timers where payload->>'callId' = ${call!.id}`;
    expect(timers.length).toBe(0);
  });

  test("without a media server configured, a live token is 503 agent_unavailable and stays valid", async () => {
    const bare = await startWorld({ liveKit: false });
    try {
      const org = await seedOrganization(bare.ctx);
      const token = await mintToken(bare.ctx, org.liveKey, org.agent.id);
      await expectApiError(await startCall(bare.ctx, { sessionToken: token }), 503, "agent_unavailable");
      const [row] = await bare.ctx.deps
        .sql`select count(*)::int as n from session_tokens where spent_at is not null`;
      expect(row!.n).toBe(0);
    } finally {
      await bare.close();
    }
  });
});

describe("the token itself", () => {
  test.each([
    ["unknown", "inf_wcs_0123456789012345678901234567890123456789012"],
    ["malformed", "not-a-token"],
    ["empty", ""],
    ["a publishable key in its place", "inf_pub_0123456789012345678901234567890123456789012"],
  ])("%s is 401 invalid_session_token", async (_name, token) => {
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 401, "invalid_session_token");
  });

  test("an expired token is 401 invalid_session_token", async () => {
    const token = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    await w.ctx.deps
      .sql`update session_tokens set expires_at = now() - interval '1 second' where spent_at is null`;
    await expectApiError(await startCall(w.ctx, { sessionToken: token }), 401, "invalid_session_token");
  });

  test("a token in the query string is ignored", async () => {
    const token = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    const res = await startCall(w.ctx, {}, { query: `?sessionToken=${token}` });
    await expectApiError(res, 400, "invalid_request");
    expect((await startCall(w.ctx, { sessionToken: token })).status).toBe(201);
  });

  test.each([
    ["a number", { sessionToken: 42 }, "sessionToken"],
    ["null", { sessionToken: null }, "sessionToken"],
    ["an unknown field", { sessionToken: "inf_wcs_x", extra: 1 }, "extra"],
    ["both forms", { sessionToken: "inf_wcs_x", publishableKey: "inf_pub_x", captchaToken: "t" }, undefined],
    ["nothing", {}, undefined],
  ])("a body with %s is 400 invalid_request", async (_name, json, param) => {
    await expectApiError(await startCall(w.ctx, json), 400, "invalid_request", { param });
  });
});

describe("concurrency and the rate limit", () => {
  test("20 parallel requests with one token from 20 addresses start exactly one call", async () => {
    const token = await mintToken(w.ctx, seed.liveKey, seed.agent.id);
    const results = await Promise.all(
      Array.from({ length: 20 }, () => startCall(w.ctx, { sessionToken: token }).then(outcomeOf)),
    );
    expect(results.filter((r) => r === "201 ok").length).toBe(1);
    expect(results.filter((r) => r === "401 invalid_session_token").length).toBe(19);
  });

  test("20 parallel requests from one address: 6 pass the rate limit, one call starts", async () => {
    const token = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    const address = freshAddress();
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => startCall(w.ctx, { sessionToken: token }, { address })),
    );
    const codes = await Promise.all(responses.map(outcomeOf));
    expect(codes.filter((r) => r === "201 ok").length).toBe(1);
    expect(codes.filter((r) => r === "401 invalid_session_token").length).toBe(5);
    expect(codes.filter((r) => r === "429 rate_limited").length).toBe(14);
    for (const res of responses.filter((r) => r.status === 429)) {
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    }
  });

  test("a spoofed X-Forwarded-For without TRUST_PROXY does not escape the limit", async () => {
    const address = freshAddress();
    const codes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await startCall(w.ctx, {}, { address, headers: { "x-forwarded-for": `203.0.113.${i}` } });
      codes.push(await outcomeOf(res));
    }
    expect(codes.slice(0, 6)).toEqual(Array(6).fill("400 invalid_request"));
    expect(codes.slice(6)).toEqual(["429 rate_limited", "429 rate_limited"]);
  });
});

describe("secrets", () => {
  test("session tokens and participant tokens never reach the logs", async () => {
    const token = await mintToken(w.ctx, seed.liveKey, seed.agent.id);
    const res = await startCall(w.ctx, { sessionToken: token });
    const body = await res.json();
    const logs = w.ctx.logs.join("\n");
    expect(logs).not.toContain(token);
    expect(logs).not.toContain(body.room.participantToken);
    expect(logs).not.toContain(w.liveKit.apiSecret);
    expect(logs).not.toContain(seed.liveKey);
    expect(logs).not.toContain(seed.testKey);
  });
});

describe("secrets in answers", () => {
  test("no answer echoes a submitted token or key, whatever the refusal", async () => {
    const spent = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    await startCall(w.ctx, { sessionToken: spent });
    const pub = seed.publishable.key;
    const bodies: unknown[] = [
      { sessionToken: spent },
      { sessionToken: spent, extra: pub },
      { sessionToken: spent, publishableKey: pub, captchaToken: "t" },
      { publishableKey: pub, captchaToken: "refused-token" },
      { publishableKey: `${pub}x`, captchaToken: "t" },
    ];
    for (const json of bodies) {
      const res = await startCall(w.ctx, json, { origin: "https://evil.example" });
      expect(res.status).toBeGreaterThanOrEqual(400);
      const text = await res.text();
      expect(text).not.toContain(spent);
      expect(text).not.toContain(pub);
      for (const [, v] of res.headers) {
        expect(v).not.toContain(spent);
        expect(v).not.toContain(pub);
      }
    }
    expect(w.ctx.logs.join("\n")).not.toContain(pub);
  });
});
