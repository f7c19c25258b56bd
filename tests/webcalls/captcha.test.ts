import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CAPTCHA_TIMEOUT_MS, type CaptchaDeps, verifyCaptcha } from "../../src/captcha/verify.ts";
import { ManualClock } from "../../src/clock.ts";
import { parseEnv } from "../../src/env.ts";
import { createTestContext, type TestContext } from "../helpers/app.ts";
import { embeddedTemplate } from "../helpers/db.ts";
import { type FakeCaptcha, startFakeCaptcha } from "../helpers/fakeCaptcha.ts";

let ctx: TestContext;
let fake: FakeCaptcha;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");
const ORIGIN = "https://shop.example.com";

beforeAll(async () => {
  fake = await startFakeCaptcha({ hostname: "shop.example.com" });
  ctx = await createTestContext({ clock, env: fake.env });
});
afterAll(async () => {
  await ctx.close();
  await fake.close();
});

function deps(
  overrides: Omit<Partial<CaptchaDeps>, "env"> & { env?: Partial<CaptchaDeps["env"]> } = {},
): CaptchaDeps {
  return {
    ...overrides,
    env: { ...ctx.deps.env, ...overrides.env },
  };
}

let n = 0;
const fresh = (answer: Parameters<FakeCaptcha["token"]>[1] = {}) =>
  fake.token(`tok-${++n}-${"x".repeat(40)}`, answer);

describe("verifyCaptcha against a siteverify server", () => {
  test("a good token passes; the verifier gets secret, response and remoteip as a form", async () => {
    const token = fresh();
    const before = fake.requests.length;
    expect(await verifyCaptcha(deps(), { token, remoteIp: "198.51.100.7", origin: ORIGIN })).toEqual({
      ok: true,
      score: 0.9,
    });
    expect(fake.requests.length).toBe(before + 1);
    expect(fake.requests.at(-1)).toEqual({
      secret: fake.secret,
      response: token,
      remoteip: "198.51.100.7",
      contentType: "application/x-www-form-urlencoded",
    });
  });

  test("the hostname must be the host of the Origin (port and case aside)", async () => {
    expect(
      (
        await verifyCaptcha(deps(), {
          token: fresh(),
          remoteIp: "1.2.3.4",
          origin: "https://SHOP.example.com:8443",
        })
      ).ok,
    ).toBe(true);
    expect(
      await verifyCaptcha(deps(), {
        token: fresh(),
        remoteIp: "1.2.3.4",
        origin: "https://evil.example.net",
      }),
    ).toEqual({ ok: false, reason: "wrong_hostname", score: 0.9 });
    expect(
      await verifyCaptcha(deps(), {
        token: fresh({ hostname: "evil.example.net" }),
        remoteIp: "1.2.3.4",
        origin: ORIGIN,
      }),
    ).toEqual({ ok: false, reason: "wrong_hostname", score: 0.9 });
  });

  test("score below RECAPTCHA_MIN_SCORE is refused; exactly the minimum passes", async () => {
    const check = (score: number, min = 0.5) =>
      verifyCaptcha(deps({ env: { RECAPTCHA_MIN_SCORE: min } }), {
        token: fresh({ score }),
        remoteIp: "1.2.3.4",
        origin: ORIGIN,
      });
    // A refusal still reports the score the verifier gave (the keys' abuse view counts it).
    expect(await check(0.4)).toEqual({ ok: false, reason: "low_score", score: 0.4 });
    expect(await check(0.5)).toEqual({ ok: true, score: 0.5 });
    expect(await check(0.7, 0.8)).toEqual({ ok: false, reason: "low_score", score: 0.7 });
  });

  test("the action must be web_call", async () => {
    expect(
      await verifyCaptcha(deps(), { token: fresh({ action: "login" }), remoteIp: "1.2.3.4", origin: ORIGIN }),
    ).toEqual({ ok: false, reason: "wrong_action", score: 0.9 });
  });

  test("success false and unknown tokens are refused", async () => {
    expect(
      await verifyCaptcha(deps(), { token: fresh({ success: false }), remoteIp: "1.2.3.4", origin: ORIGIN }),
    ).toEqual({ ok: false, reason: "rejected" });
    expect(
      await verifyCaptcha(deps(), { token: "never-issued", remoteIp: "1.2.3.4", origin: ORIGIN }),
    ).toEqual({
      ok: false,
      reason: "rejected",
    });
  });

  test("a wrong secret is refused by the verifier", async () => {
    expect(
      await verifyCaptcha(deps({ env: { RECAPTCHA_SECRET: "wrong" } }), {
        token: fresh(),
        remoteIp: "1.2.3.4",
        origin: ORIGIN,
      }),
    ).toEqual({ ok: false, reason: "rejected" });
  });

  test("missing token, missing Origin and unset secret are refused without asking the verifier", async () => {
    const before = fake.requests.length;
    for (const token of [undefined, null, "", 42, { t: 1 }, "x".repeat(10_000)]) {
      expect(await verifyCaptcha(deps(), { token, remoteIp: "1.2.3.4", origin: ORIGIN })).toEqual({
        ok: false,
        reason: "missing_token",
      });
    }
    for (const origin of [undefined, "", "null", "not a url", "chrome-extension://abc"]) {
      expect(await verifyCaptcha(deps(), { token: fresh(), remoteIp: "1.2.3.4", origin })).toEqual({
        ok: false,
        reason: "missing_origin",
      });
    }
    expect(
      await verifyCaptcha(deps({ env: { RECAPTCHA_SECRET: undefined } }), {
        token: fresh(),
        remoteIp: "1.2.3.4",
        origin: ORIGIN,
      }),
    ).toEqual({ ok: false, reason: "not_configured" });
    expect(fake.requests.length).toBe(before);
  });

  test("a verifier slower than the limit is a refusal (5 s by default)", async () => {
    expect(CAPTCHA_TIMEOUT_MS).toBe(5000);
    const started = performance.now();
    const result = await verifyCaptcha(deps({ timeoutMs: 150 }), {
      token: fresh({ delayMs: 20_000 }),
      remoteIp: "1.2.3.4",
      origin: ORIGIN,
    });
    expect(result).toEqual({ ok: false, reason: "verifier_unreachable" });
    // Given up at its limit, long before the verifier would have answered (it would have passed).
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  test("an unreachable or broken verifier is a refusal", async () => {
    const down = await startFakeCaptcha();
    const url = down.url;
    await down.close();
    expect(
      await verifyCaptcha(deps({ env: { RECAPTCHA_VERIFY_URL: url } }), {
        token: fresh(),
        remoteIp: "1.2.3.4",
        origin: ORIGIN,
      }),
    ).toEqual({ ok: false, reason: "verifier_unreachable" });
    const broken = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () => new Response("<html>oops</html>"),
    });
    try {
      expect(
        await verifyCaptcha(deps({ env: { RECAPTCHA_VERIFY_URL: `http://127.0.0.1:${broken.port}/` } }), {
          token: fresh(),
          remoteIp: "1.2.3.4",
          origin: ORIGIN,
        }),
      ).toEqual({ ok: false, reason: "verifier_unreachable" });
    } finally {
      await broken.stop(true);
    }
  });

  test("a token used again is the verifier's to refuse: asked each time, its answer decides", async () => {
    const single = fresh();
    const input = { token: single, remoteIp: "1.2.3.4", origin: ORIGIN };
    const asked = fake.requests.length;
    expect((await verifyCaptcha(deps(), input)).ok).toBe(true);
    // The verifier refuses a duplicate (`timeout-or-duplicate`), as the real one does.
    expect(await verifyCaptcha(deps(), input)).toEqual({ ok: false, reason: "rejected" });
    // A verifier that accepts the same token again is believed: nothing here keeps tokens.
    const reusable = fresh({ reusable: true });
    for (let i = 0; i < 3; i++) {
      expect(await verifyCaptcha(deps(), { ...input, token: reusable })).toEqual({ ok: true, score: 0.9 });
    }
    expect(fake.requests.length - asked).toBe(5);
  });
});

describe("serve without RECAPTCHA_SECRET", () => {
  test("logs a warning at start", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vs-captcha-"));
    // On the embedded database, a migrated copy: creating one takes long on a busy machine.
    if (!ctx.db.url) cpSync(await embeddedTemplate(), dir, { recursive: true });
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "",
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      DATA_DIR: dir,
    };
    if (ctx.db.url) env.DATABASE_URL = ctx.db.url;
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../../src/main.ts"), "serve"], {
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    const lines: string[] = [];
    try {
      const reader = proc.stdout.getReader();
      let buffer = "";
      const deadline = Date.now() + 30_000;
      while (!lines.some((l) => l.includes('"listening"')) && Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += new TextDecoder().decode(value);
        const parts = buffer.split("\n");
        buffer = parts.pop() ?? "";
        lines.push(...parts);
      }
      reader.releaseLock();
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    }
    const warning = lines.map((l) => JSON.parse(l)).find((l) => l.level === "warn");
    expect(warning?.msg).toContain("RECAPTCHA_SECRET");
    expect(lines.some((l) => l.includes('"listening"'))).toBe(true);
  });

  test("the environment parses an unset secret as undefined", () => {
    expect(parseEnv({}).RECAPTCHA_SECRET).toBeUndefined();
    expect(parseEnv({ RECAPTCHA_SECRET: "" }).RECAPTCHA_SECRET).toBeUndefined();
  });
});
