import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { type FakeCaptcha, startFakeCaptcha } from "../helpers/fakeCaptcha.ts";
import { type FakeLiveKit, liveKitEvents, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import { freshAddress, requestFrom, type Seed, type Server, seed, startServer } from "./support.ts";

/**
 * POST /api/v1/web-calls over HTTP, from distinct client addresses (sockets bound to 127.42.x.y): the
 * address the runtime's server hands to the app decides the rate limit and reaches the bot check. The
 * bot check and LiveKit are local servers speaking their wire protocols.
 */

let server: Server;
let captcha: FakeCaptcha;
let liveKit: FakeLiveKit;
let s: Seed;
beforeAll(async () => {
  captcha = await startFakeCaptcha();
  liveKit = await startFakeLiveKit();
  server = await startServer({ env: { ...captcha.env, ...liveKit.env } });
  s = await seed(server);
});
afterAll(async () => {
  await server.stop();
  await liveKit.close();
  await captcha.close();
});

const ORIGIN = "https://shop.example.com";
let captchaTokens = 0;
const goodCaptcha = () => captcha.token(`good-${++captchaTokens}`);

/** POST /api/v1/web-calls from `from` (default: an address of its own). */
function startCall(
  body: unknown,
  opts: { from?: string; origin?: string | null; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { "content-type": "application/json", ...opts.headers };
  if (opts.origin !== null) headers.origin = opts.origin ?? ORIGIN;
  return requestFrom(opts.from ?? freshAddress(), `${server.url}/api/v1/web-calls`, {
    method: "POST",
    headers,
    body: JSON.stringify(body),
  });
}

async function mintToken(key: string, variables?: Record<string, unknown>): Promise<string> {
  const res = await server.fetch("/api/v1/web-call-sessions", {
    method: "POST",
    key,
    json: { agentId: s.agent.id, ...(variables ? { variables } : {}) },
  });
  expect(res.status).toBe(201);
  return (await res.json()).token;
}

const readCall = async (id: string, key: string) =>
  (await (await server.fetch(`/api/v1/calls/${id}`, { key })).json()) as {
    status: string;
    livemode: boolean;
  };

describe("a session token", () => {
  test("test mode: a simulated call that plays out to completed, readable with a test key only", async () => {
    const token = await mintToken(s.testKey, { customer: "Ada" });
    const before = liveKit.requests.length;
    const res = await startCall({ sessionToken: token }, { origin: "https://anywhere.example.org" });
    expect(res.status).toBe(201);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://anywhere.example.org");
    const body = await res.json();
    expect(body).toEqual({
      simulated: true,
      livemode: false,
      maxSeconds: 600,
      callId: expect.stringMatching(/^call_/),
    });
    expect(liveKit.requests.length).toBe(before);
    expect(await outcomeOf(await server.fetch(`/api/v1/calls/${body.callId}`, { key: s.liveKey }))).toBe(
      "404 not_found",
    );
    // The server's own timers play it (SIMULATION_TIME_SCALE 0.01): completed within seconds.
    const done = await waitUntil("the simulated call to complete", async () => {
      const call = await readCall(body.callId, s.testKey);
      return call.status === "completed" && call;
    });
    expect(done.livemode).toBe(false);
  });

  test("is spent by its call: a second use is 401 invalid_session_token", async () => {
    const token = await mintToken(s.testKey);
    expect(await outcomeOf(await startCall({ sessionToken: token }))).toBe("201 ok");
    expect(await outcomeOf(await startCall({ sessionToken: token }))).toBe("401 invalid_session_token");
  });

  test("live mode: the room and the dispatch are made on LiveKit; the answer is a room to join", async () => {
    const token = await mintToken(s.liveKey, { orderId: 1042 });
    const from = liveKit.requests.length;
    const res = await startCall({ sessionToken: token });
    expect(res.status).toBe(201);
    const body = await res.json();
    expect(body).toMatchObject({ livemode: true, maxSeconds: 600, room: { name: body.callId } });
    expect(body.room.serverUrl).toBe(liveKit.url.replace(/^http/, "ws"));
    expect(JSON.stringify(body)).not.toContain("1042");
    const made = liveKit.requests.slice(from);
    expect(made.map((r) => `${r.method} ${r.status}`)).toEqual(["CreateRoom 200", "CreateDispatch 200"]);
    expect(JSON.parse(String(made[1]!.body.metadata))).toEqual({
      callId: body.callId,
      variables: { orderId: 1042 },
    });
    expect(server.service.output()).not.toContain(body.room.participantToken);
  });
});

describe("a publishable key", () => {
  test("from a listed origin with a passing bot check: a live call; the verifier gets the client's address", async () => {
    const from = freshAddress();
    const verified = captcha.requests.length;
    const res = await startCall({ publishableKey: s.publishable.key, captchaToken: goodCaptcha() }, { from });
    expect(res.status).toBe(201);
    expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    const body = await res.json();
    expect(body.livemode).toBe(true);
    expect(body.room.name).toBe(body.callId);
    const asked = captcha.requests.slice(verified);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ secret: captcha.secret, remoteip: from });
  });

  test("refusals in order: origin not listed or absent 403, no bot check token 400, a failed one 400", async () => {
    const key = s.publishable.key;
    expect(
      await outcomeOf(
        await startCall(
          { publishableKey: key, captchaToken: goodCaptcha() },
          { origin: "https://evil.example.com" },
        ),
      ),
    ).toBe("403 origin_not_allowed");
    expect(
      await outcomeOf(
        await startCall({ publishableKey: key, captchaToken: goodCaptcha() }, { origin: null }),
      ),
    ).toBe("403 origin_not_allowed");
    expect(await outcomeOf(await startCall({ publishableKey: key }))).toBe("400 invalid_captcha");
    const failing = captcha.token(`bad-${++captchaTokens}`, { success: false });
    expect(await outcomeOf(await startCall({ publishableKey: key, captchaToken: failing }))).toBe(
      "400 invalid_captcha",
    );
    expect(
      await outcomeOf(await startCall({ publishableKey: "inf_pub_nope", captchaToken: goodCaptcha() })),
    ).toBe("401 invalid_key");
  });

  test("a preflight from any origin is allowed", async () => {
    const res = await requestFrom(freshAddress(), `${server.url}/api/v1/web-calls`, {
      method: "OPTIONS",
      headers: {
        origin: "https://anywhere.example.org",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
      },
    });
    expect(res.status).toBeLessThan(300);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://anywhere.example.org");
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
  });
});

describe("the rate limit counts the socket's peer address", () => {
  test("the 7th request in 10 minutes from one address is 429 with Retry-After; other addresses go on", async () => {
    const from = freshAddress();
    for (let i = 0; i < 6; i++) {
      // Malformed requests count too.
      expect(await outcomeOf(await startCall({ nothing: true }, { from }))).toBe("400 invalid_request");
    }
    const limited = await startCall({ sessionToken: await mintToken(s.testKey) }, { from });
    await expectApiError(limited, 429, "rate_limited");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(limited.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(await outcomeOf(await startCall({ sessionToken: await mintToken(s.testKey) }))).toBe("201 ok");
  });

  test("X-Forwarded-For is not read from a peer outside TRUST_PROXY", async () => {
    const from = freshAddress();
    for (let i = 0; i < 6; i++) {
      const headers = { "x-forwarded-for": freshAddress(), "x-real-ip": freshAddress() };
      expect(await outcomeOf(await startCall({}, { from, headers }))).toBe("400 invalid_request");
    }
    const headers = { "x-forwarded-for": freshAddress() };
    expect(await outcomeOf(await startCall({}, { from, headers }))).toBe("429 rate_limited");
  });
});

describe("LiveKit's webhook", () => {
  async function deliver(event: Record<string, unknown>, opts: { secret?: string } = {}) {
    const { body, headers } = await liveKit.signWebhook(event, opts.secret ? { secret: opts.secret } : {});
    return server.fetch("/api/livekit/webhook", { method: "POST", body, headers });
  }

  test("a live call moves to ongoing when the visitor joins and to completed when the room finishes", async () => {
    const res = await startCall({ sessionToken: await mintToken(s.liveKey) });
    const { callId } = await res.json();
    expect((await readCall(callId, s.liveKey)).status).toBe("initiated");
    const joined = await deliver(liveKitEvents.participantJoined(callId, `visitor-${callId}`));
    expect(joined.status).toBe(200);
    expect(await joined.json()).toEqual({ received: true });
    expect((await readCall(callId, s.liveKey)).status).toBe("ongoing");
    expect((await deliver(liveKitEvents.roomFinished(callId))).status).toBe(200);
    expect((await readCall(callId, s.liveKey)).status).toBe("completed");
  });

  test("a bad signature is 401 invalid_signature and changes nothing", async () => {
    const { callId } = await (await startCall({ sessionToken: await mintToken(s.liveKey) })).json();
    const forged = await deliver(liveKitEvents.roomFinished(callId), { secret: "not-the-secret" });
    await expectApiError(forged, 401, "invalid_signature");
    expect((await readCall(callId, s.liveKey)).status).toBe("initiated");
  });
});
