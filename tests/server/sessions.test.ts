import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { type Seed, type Server, seed, startServer } from "./support.ts";

/** Session tokens over HTTP: minting, validation, Idempotency-Key, concurrent requests. */

let server: Server;
let s: Seed;
let other: Seed;
beforeAll(async () => {
  server = await startServer();
  s = await seed(server);
  other = await seed(server);
});
afterAll(() => server.stop());

const TOKEN = /^inf_wcs_[A-Za-z0-9_-]{43}$/;
const mint = (body: unknown, opts: { key?: string; idempotencyKey?: string } = {}) =>
  server.fetch("/api/v1/web-call-sessions", {
    method: "POST",
    key: opts.key ?? s.liveKey,
    json: body,
    headers: opts.idempotencyKey ? { "idempotency-key": opts.idempotencyKey } : {},
  });

describe("minting", () => {
  test("201 with a single-use token valid five minutes, in the key's mode", async () => {
    for (const [key, livemode] of [
      [s.liveKey, true],
      [s.testKey, false],
    ] as const) {
      const before = Date.now();
      const res = await mint({ agentId: s.agent.id, variables: { customer: "Ada", order: 1042 } }, { key });
      const after = Date.now();
      expect(res.status).toBe(201);
      const body = await res.json();
      expect(Object.keys(body).sort()).toEqual(["expiresAt", "livemode", "token"]);
      expect(body.token).toMatch(TOKEN);
      expect(body.livemode).toBe(livemode);
      // Five minutes after the moment the server minted it, somewhere between the request and its answer.
      const expires = Date.parse(body.expiresAt);
      expect(expires).toBeGreaterThanOrEqual(before + 5 * 60_000);
      expect(expires).toBeLessThanOrEqual(after + 5 * 60_000);
    }
  });

  test("an unknown or foreign agent is 404 not_found with param agentId", async () => {
    for (const agentId of ["agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", other.agent.id]) {
      await expectApiError(await mint({ agentId }), 404, "not_found", { param: "agentId" });
    }
  });

  test("variables that are not flat, too many or too long are 400 invalid_request naming them", async () => {
    const cases: [unknown, string][] = [
      [{ agentId: s.agent.id, variables: { a: { b: 1 } } }, "variables.a"],
      [{ agentId: s.agent.id, variables: { list: [1] } }, "variables.list"],
      [{ agentId: s.agent.id, variables: { s: "x".repeat(1001) } }, "variables.s"],
      [
        {
          agentId: s.agent.id,
          variables: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])),
        },
        "variables",
      ],
      [{ agentId: 42 }, "agentId"],
    ];
    for (const [body, param] of cases) {
      await expectApiError(await mint(body), 400, "invalid_request", { param });
    }
  });

  test("20 mints at once give 20 different tokens", async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => mint({ agentId: s.agent.id })));
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(201));
    const tokens = await Promise.all(answers.map(async (r) => (await r.json()).token));
    expect(new Set(tokens).size).toBe(20);
  });
});

describe("Idempotency-Key", () => {
  test("a replay returns the first answer with Idempotent-Replayed: true", async () => {
    const first = await mint({ agentId: s.agent.id, variables: { a: 1 } }, { idempotencyKey: "order-1" });
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await mint({ variables: { a: 1 }, agentId: s.agent.id }, { idempotencyKey: "order-1" });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(await first.json());
  });

  test("the same key with another body is 409 idempotency_key_reused", async () => {
    await mint({ agentId: s.agent.id }, { idempotencyKey: "order-2" });
    const res = await mint({ agentId: s.agent.id, variables: { a: 2 } }, { idempotencyKey: "order-2" });
    expect(await outcomeOf(res)).toBe("409 idempotency_key_reused");
  });

  test("keys are per mode: the same key in the other mode mints another token", async () => {
    const live = await (await mint({ agentId: s.agent.id }, { idempotencyKey: "order-3" })).json();
    const test = await (
      await mint({ agentId: s.agent.id }, { key: s.testKey, idempotencyKey: "order-3" })
    ).json();
    expect(test.token).not.toBe(live.token);
    expect(test.livemode).toBe(false);
  });

  test("20 concurrent requests with one key all receive the one token", async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => mint({ agentId: s.agent.id }, { idempotencyKey: "order-burst" })),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(201));
    const tokens = new Set(await Promise.all(answers.map(async (r) => (await r.json()).token)));
    expect(tokens.size).toBe(1);
  });

  test("a key outside 1–255 printable characters is 400 invalid_request", async () => {
    for (const key of ["x".repeat(256), "tab\there"]) {
      expect(await outcomeOf(await mint({ agentId: s.agent.id }, { idempotencyKey: key }))).toBe(
        "400 invalid_request",
      );
    }
  });
});

test("no token minted here appears in anything the process wrote", async () => {
  const res = await mint({ agentId: s.agent.id });
  const { token } = await res.json();
  // This request's own log line has been written.
  const line = await server.service.waitFor(new RegExp(`"requestId":"${res.headers.get("x-request-id")}".*`));
  expect(line[0]).toContain('"path":"/api/v1/web-call-sessions"');
  expect(server.service.output()).not.toContain(token);
  expect(server.service.output()).not.toContain(token.slice("inf_wcs_".length));
});
