import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { updateOrganization } from "../../src/services/organizations.ts";
import { type ServerProcess, startServer } from "../calls/process.ts";
import { depsFor, seedOrganization } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";
import { outcomeOf } from "../helpers/errors.ts";
import { type FakeCaptcha, startFakeCaptcha } from "../helpers/fakeCaptcha.ts";
import { type FakeLiveKit, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { freshAddress, requestFrom } from "../server/support.ts";

/**
 * The abuse view of a publishable key counted by two real server processes on one PostgreSQL
 * database (the embedded one serves a single process), attempts arriving at both at once: every start
 * and every refusal is counted once, with its minutes, scores and origins.
 */

const ADMIN_TOKEN = "adm_two_processes_0123456789abcdefghijklmnop";
const SHOP = "https://shop.example.com";

let db: TestDatabase;
let captcha: FakeCaptcha;
let liveKit: FakeLiveKit;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const servers: ServerProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase("postgres");
  captcha = await startFakeCaptcha();
  liveKit = await startFakeLiveKit();
  const deps = depsFor(db.sql);
  seed = await seedOrganization({ deps }, { cap: 1000, planMinutes: 100_000 });
  await updateOrganization(deps, seed.org.id, { maxConcurrentCalls: 1000, maxCallsPerHour: 1000 });
  const env = { DATABASE_URL: db.url!, ADMIN_TOKEN, ...captcha.env, ...liveKit.env };
  servers.push(await startServer(env), await startServer(env));
}, 90_000);
afterAll(async () => {
  for (const s of servers) s.proc.kill("SIGTERM");
  await Promise.all(servers.map((s) => s.exited));
  await liveKit.close();
  await captcha.close();
  await db.close();
});

describe("two processes counting the same key", () => {
  test("parallel starts and refusals through both are each counted once", async () => {
    let tokens = 0;
    const attempts: { origin: string; captcha: string; expected: string }[] = [];
    for (let i = 0; i < 10; i++) {
      const token = (answer: Parameters<FakeCaptcha["token"]>[1]) => captcha.token(`t-${++tokens}`, answer);
      attempts.push(
        { origin: SHOP, captcha: token({ score: 0.9 }), expected: "201 ok" },
        { origin: SHOP, captcha: token({ score: 1 }), expected: "201 ok" },
        { origin: "https://copycat.example.net", captcha: token({}), expected: "403 origin_not_allowed" },
        { origin: SHOP, captcha: token({ success: false }), expected: "400 invalid_captcha" },
      );
    }
    const outcomes = await Promise.all(
      attempts.map(async (a, i) => {
        const server = servers[i % 2]!;
        const res = await requestFrom(freshAddress(), `${server.url}/api/v1/web-calls`, {
          method: "POST",
          headers: { "content-type": "application/json", origin: a.origin },
          body: JSON.stringify({ publishableKey: seed.publishable.key, captchaToken: a.captcha }),
        });
        return outcomeOf(res);
      }),
    );
    expect(outcomes).toEqual(attempts.map((a) => a.expected));
    // Read from either process: one aggregate.
    for (const server of servers) {
      const res = await fetch(
        `${server.url}/api/admin/v1/publishable-keys/${seed.publishable.id}/stats?days=1`,
        {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        },
      );
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(body.days).toEqual([
        {
          date: new Date().toISOString().slice(0, 10),
          attempts: 40,
          started: 20,
          refused: { origin_not_allowed: 10, invalid_captcha: 10 },
          // Each live call reserves its ten minutes (maxSeconds 600) as it starts.
          minutes: 200,
        },
      ]);
      expect(body.captchaScores).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 10]);
      expect(
        [...body.topRefusedOrigins].sort((x: { origin: string }, y: { origin: string }) =>
          x.origin.localeCompare(y.origin),
        ),
      ).toEqual([
        { origin: "https://copycat.example.net", count: 10 },
        { origin: SHOP, count: 10 },
      ]);
    }
    expect(liveKit.requests.filter((r) => r.method === "CreateRoom")).toHaveLength(20);
  }, 60_000);
});
