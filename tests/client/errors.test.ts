import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { VoiceService, VoiceServiceError } from "voice-service/client";
import { createSecretKey } from "../../src/services/keys.ts";
import { REQUEST_ID } from "../helpers/errors.ts";
import { type ClientWorld, rejection, startClientWorld } from "./support.ts";

/**
 * Each class of refusal reaches the caller as a VoiceServiceError with the API's code, param, status
 * and request id (from the started server); retries after 429 and 503 (from a local fake server,
 * which answers what each test scripts).
 */

let world: ClientWorld;
beforeAll(async () => {
  world = await startClientWorld();
});
afterAll(() => world.close());

async function apiError(promise: Promise<unknown>): Promise<VoiceServiceError> {
  const err = await rejection(promise);
  expect(err).toBeInstanceOf(VoiceServiceError);
  const e = err as VoiceServiceError;
  expect(e.requestId).toMatch(REQUEST_ID);
  expect(e.message.length).toBeGreaterThan(5);
  return e;
}

const fields = (e: VoiceServiceError) => ({ status: e.status, code: e.code, param: e.param });

describe("refusals of the real API", () => {
  test("401 invalid_key: an unknown key", async () => {
    const client = world.client("inf_test_0000000000000000000000000000");
    const e = await apiError(client.calls.list().page());
    expect(fields(e)).toEqual({ status: 401, code: "invalid_key", param: undefined });
  });

  test("403 missing_scope: a key without the operation's scope", async () => {
    const key = await createSecretKey(world.ctx.deps, world.seed.org.id, {
      mode: "test",
      scopes: ["calls:read"],
    });
    const client = world.client(key.key);
    expect((await client.calls.list().page()).data).toBeArray();
    const e = await apiError(client.contacts.create({ phone: "+33612345678" }));
    expect(fields(e)).toEqual({ status: 403, code: "missing_scope", param: undefined });
  });

  test("404 not_found: an unknown id", async () => {
    const e = await apiError(world.client(world.seed.testKey).calls.get("call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"));
    expect(fields(e)).toEqual({ status: 404, code: "not_found", param: undefined });
  });

  test("400 invalid_request with the field at fault", async () => {
    const client = world.client(world.seed.testKey);
    const e = await apiError(client.calls.create({ agentId: world.seed.agent.id, to: "not a phone" }));
    expect(fields(e)).toEqual({ status: 400, code: "invalid_request", param: "to" });
  });

  test("400 invalid_query with the parameter at fault", async () => {
    const client = world.client(world.seed.testKey);
    const e = await apiError(client.calls.list({ limit: 500 }).page());
    expect(fields(e)).toEqual({ status: 400, code: "invalid_query", param: "limit" });
  });

  test("409 idempotency_key_reused: one key, two bodies", async () => {
    const client = world.client(world.seed.testKey);
    const idempotencyKey = crypto.randomUUID();
    await client.webCallSessions.create({ agentId: world.seed.agent.id }, { idempotencyKey });
    const other = client.webCallSessions.create(
      { agentId: world.seed.agent.id, variables: { firstName: "Ada" } },
      { idempotencyKey },
    );
    expect(fields(await apiError(other))).toEqual({
      status: 409,
      code: "idempotency_key_reused",
      param: undefined,
    });
  });

  test("no answer at all: status 0, connection_error", async () => {
    const client = new VoiceService({ apiKey: world.seed.testKey, baseUrl: "http://127.0.0.1:9" });
    const err = await rejection(client.calls.list().page());
    expect(err).toBeInstanceOf(VoiceServiceError);
    expect(fields(err as VoiceServiceError)).toEqual({
      status: 0,
      code: "connection_error",
      param: undefined,
    });
  });
});

/** A server that answers each request with the next scripted answer (then 200 `{}`), and records them. */
function fakeServer() {
  const script: (() => Response)[] = [];
  const seen: { at: number; method: string; path: string; headers: Headers }[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const url = new URL(req.url);
      seen.push({ at: Date.now(), method: req.method, path: url.pathname, headers: req.headers });
      return script.shift()?.() ?? Response.json({ data: [], has_more: false });
    },
  });
  return { baseUrl: `http://127.0.0.1:${server.port}`, script, seen, stop: () => server.stop(true) };
}

const refusal =
  (status: number, code: string, headers: Record<string, string> = {}) =>
  () =>
    Response.json(
      { error: { code, message: `refused: ${code}`, requestId: "req_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" } },
      { status, headers: { "x-request-id": "req_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", ...headers } },
    );

describe("retries (fake server)", () => {
  const fake = fakeServer();
  afterAll(() => fake.stop());
  const client = (opts: Partial<ConstructorParameters<typeof VoiceService>[0]> = {}) =>
    new VoiceService({ apiKey: "inf_test_x", baseUrl: fake.baseUrl, retryDelayMs: 20, ...opts });

  test("a 429 with Retry-After: 1 is retried after one second, then succeeds", async () => {
    fake.seen.length = 0;
    fake.script.push(refusal(429, "rate_limited", { "retry-after": "1" }));
    const page = await client().calls.list().page();
    expect(page).toEqual({ data: [], has_more: false });
    expect(fake.seen).toHaveLength(2);
    expect(fake.seen[1]!.at - fake.seen[0]!.at).toBeGreaterThanOrEqual(950);
  });

  test("503s are retried with backoff, at most maxRetries times, then the last error is thrown", async () => {
    fake.seen.length = 0;
    for (let i = 0; i < 4; i++) fake.script.push(refusal(503, "agent_unavailable"));
    const err = await rejection(client({ maxRetries: 3 }).agents.list());
    expect(fields(err as VoiceServiceError)).toEqual({
      status: 503,
      code: "agent_unavailable",
      param: undefined,
    });
    expect(fake.seen).toHaveLength(4);
    // Backoff from 20 ms, doubled each time, with jitter of at most half.
    const gaps = fake.seen.slice(1).map((s, i) => s.at - fake.seen[i]!.at);
    expect(gaps[2]!).toBeGreaterThanOrEqual(40);
    fake.script.length = 0;
  });

  test("a Retry-After beyond maxRetryDelayMs is not waited for", async () => {
    fake.seen.length = 0;
    fake.script.push(refusal(429, "minute_cap_reached", { "retry-after": "86400" }));
    const err = (await rejection(client().calls.list().page())) as VoiceServiceError;
    expect(err.retryAfter).toBe(86400);
    expect(fake.seen).toHaveLength(1);
  });

  test("writes without an Idempotency-Key are not retried; maxRetries 0 retries nothing", async () => {
    fake.seen.length = 0;
    fake.script.push(refusal(503, "carrier_unavailable"), refusal(503, "agent_unavailable"));
    const create = client().calls.create({ agentId: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", to: "+33612345678" });
    expect(((await rejection(create)) as VoiceServiceError).code).toBe("carrier_unavailable");
    expect(((await rejection(client({ maxRetries: 0 }).agents.list())) as VoiceServiceError).code).toBe(
      "agent_unavailable",
    );
    expect(fake.seen).toHaveLength(2);
  });

  test("minting is retried with the same Idempotency-Key", async () => {
    fake.seen.length = 0;
    fake.script.push(refusal(503, "agent_unavailable"), refusal(429, "rate_limited", { "retry-after": "0" }));
    await client().webCallSessions.create({ agentId: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
    expect(fake.seen).toHaveLength(3);
    const keys = fake.seen.map((s) => s.headers.get("idempotency-key"));
    expect(keys[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(keys).size).toBe(1);
  });

  test("an error answer that is not the API's envelope is unexpected_response", async () => {
    fake.script.push(() => new Response("<html>Bad gateway</html>", { status: 502 }));
    const err = (await rejection(client().agents.list())) as VoiceServiceError;
    expect(fields(err)).toEqual({ status: 502, code: "unexpected_response", param: undefined });
  });
});
