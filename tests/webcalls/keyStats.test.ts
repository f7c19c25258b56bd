import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { createApp } from "../../src/app.ts";
import { runAdmin } from "../../src/cli/admin.ts";
import { composeDeps } from "../../src/compose.ts";
import { driverOptions } from "../../src/db/engine/connection.ts";
import {
  countKeyAttempt,
  MAX_ORIGINS_PER_DAY,
  OTHER_ORIGINS,
  scoreBucket,
} from "../../src/db/publishableKeyStats.ts";
import { updateAgent } from "../../src/services/agents.ts";
import { settleMinutes } from "../../src/services/minutes.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { ADMIN_TOKEN, admin } from "../admin/support.ts";
import { outcomeOf } from "../helpers/errors.ts";
import {
  freshAddress,
  type Seed,
  seedOrganization,
  startCall,
  startWorld,
  type WebCallWorld,
} from "./support.ts";

/**
 * The abuse view of a publishable key (GET /api/admin/v1/publishable-keys/{id}/stats): counted from
 * real attempts as they are refused or started, exact under parallel attempts from two processes.
 */

let w: WebCallWorld;
let tokens = 0;
beforeAll(async () => {
  w = await startWorld({ env: { ADMIN_TOKEN } });
});
afterAll(() => w.close());

const good = (score = 0.9) => w.captcha.token(`good-${++tokens}`, { score });
const today = () => new Date().toISOString().slice(0, 10);

async function stats(keyId: string, query = "") {
  const { status, body } = await admin(w.ctx, "GET", `/publishable-keys/${keyId}/stats${query}`);
  expect(status).toBe(200);
  return body;
}

describe("what is counted", () => {
  let seed: Seed;
  beforeAll(async () => {
    seed = await seedOrganization(w.ctx, { cap: 100, planMinutes: 1000 });
  });
  const key = () => seed.publishable.key;

  test("starts and every refusal under its code, with scores, origins and minutes", async () => {
    const expectations: [Promise<Response>, string][] = [];
    const attempt = (json: unknown, expected: string, opts: Parameters<typeof startCall>[2] = {}) =>
      expectations.push([startCall(w.ctx, json, opts), expected]);
    // Two calls start (scores 0.9 and 1.0).
    attempt({ publishableKey: key(), captchaToken: good() }, "201 ok");
    attempt({ publishableKey: key(), captchaToken: good(1) }, "201 ok");
    // Refusals: a foreign website (twice), no Origin at all, a failed and a low-scored bot check.
    attempt({ publishableKey: key(), captchaToken: good() }, "403 origin_not_allowed", {
      origin: "https://copycat.example.net",
    });
    attempt({ publishableKey: key(), captchaToken: good() }, "403 origin_not_allowed", {
      origin: "https://copycat.example.net",
    });
    attempt({ publishableKey: key(), captchaToken: good() }, "403 origin_not_allowed", { origin: null });
    attempt(
      { publishableKey: key(), captchaToken: w.captcha.token(`bad-${++tokens}`, { success: false }) },
      "400 invalid_captcha",
    );
    attempt({ publishableKey: key(), captchaToken: good(0.2) }, "400 invalid_captcha");
    // Attempts with an unknown key are nobody's.
    attempt({ publishableKey: `inf_pub_${"0".repeat(43)}`, captchaToken: good() }, "401 invalid_key");
    for (const [res, expected] of expectations) expect(await outcomeOf(await res)).toBe(expected);

    // Then the organization loses its plan, and the agent its activity.
    await updateOrganization(w.ctx.deps, seed.org.id, { paidPlan: false });
    expect(await outcomeOf(await startCall(w.ctx, { publishableKey: key(), captchaToken: good() }))).toBe(
      "403 plan_required",
    );
    await updateOrganization(w.ctx.deps, seed.org.id, { paidPlan: true });
    await updateAgent(w.ctx.deps, seed.agent.id, { active: false });
    expect(await outcomeOf(await startCall(w.ctx, { publishableKey: key(), captchaToken: good() }))).toBe(
      "503 agent_unavailable",
    );
    await updateAgent(w.ctx.deps, seed.agent.id, { active: true });

    const body = await stats(seed.publishable.id);
    expect(body.days).toHaveLength(30);
    expect(body.days.at(-1)).toEqual({
      date: today(),
      attempts: 9,
      started: 2,
      refused: { origin_not_allowed: 3, invalid_captcha: 2, plan_required: 1, agent_unavailable: 1 },
      minutes: 20,
    });
    expect(body.days.slice(0, -1).every((d: { attempts: number }) => d.attempts === 0)).toBe(true);
    const scores = Array(11).fill(0);
    // Every verified answer's score counts: 0.9 for the starts and the later refusals, 1.0 and 0.2 once.
    scores[scoreBucket(0.9)] = 3;
    scores[10] = 1;
    scores[2] = 1;
    expect(body.captchaScores).toEqual(scores);
    expect(body.topRefusedOrigins).toEqual([
      { origin: "https://shop.example.com", count: 4 },
      { origin: "https://copycat.example.net", count: 2 },
      { origin: "(none)", count: 1 },
    ]);
  });

  test("the minutes of a started call become what it kept once it ends", async () => {
    const before = (await stats(seed.publishable.id)).days.at(-1).minutes;
    const res = await startCall(w.ctx, { publishableKey: key(), captchaToken: good() });
    expect(res.status).toBe(201);
    const { callId } = await res.json();
    expect((await stats(seed.publishable.id)).days.at(-1).minutes).toBe(before + 10);
    await settleMinutes(w.ctx.deps.sql, w.ctx.deps.clock, callId, 61);
    expect((await stats(seed.publishable.id)).days.at(-1).minutes).toBe(before + 2);
  });

  test("a start the media server then fails counts under call_start_failed, not as started, its minutes given back", async () => {
    const beforeAll = await stats(seed.publishable.id);
    const before = beforeAll.days.at(-1);
    w.liveKit.fail("CreateRoom");
    try {
      const res = await startCall(w.ctx, { publishableKey: key(), captchaToken: good() });
      expect(await outcomeOf(res)).toBe("502 call_start_failed");
    } finally {
      w.liveKit.fail("CreateRoom", null);
    }
    const after = (await stats(seed.publishable.id)).days.at(-1);
    expect(after.attempts).toBe(before.attempts + 1);
    expect(after.started).toBe(before.started);
    expect(after.refused.call_start_failed ?? 0).toBe((before.refused.call_start_failed ?? 0) + 1);
    expect(after.minutes).toBe(before.minutes);
    // A refusal like the others: from its origin too.
    const fromShop = (body: { topRefusedOrigins: { origin: string; count: number }[] }) =>
      body.topRefusedOrigins.find((o) => o.origin === "https://shop.example.com")?.count ?? 0;
    expect(fromShop(await stats(seed.publishable.id))).toBe(fromShop(beforeAll) + 1);
  });

  test("a malformed request carrying the key counts under invalid_request, or rate_limited once over the limit", async () => {
    const org = await seedOrganization(w.ctx, { cap: 100 });
    const address = freshAddress();
    const codes: string[] = [];
    for (const json of [
      { publishableKey: org.publishable.key, captchaToken: 12 }, // the validator's refusal
      { publishableKey: org.publishable.key, captchaToken: good(), sessionToken: "inf_wcs_x" }, // the route's
      { publishableKey: org.publishable.key, captchaToken: good(), extra: true },
      { captchaToken: good() }, // no key: nobody's
      { publishableKey: `inf_pub_${"2".repeat(43)}`, captchaToken: 12 }, // an unknown key: nobody's
      { publishableKey: org.publishable.key, captchaToken: 12 },
      { publishableKey: org.publishable.key, captchaToken: 12 }, // the seventh from the address
    ]) {
      codes.push(await outcomeOf(await startCall(w.ctx, json, { address })));
    }
    expect(codes).toEqual([...Array(6).fill("400 invalid_request"), "429 rate_limited"]);
    const body = await stats(org.publishable.id, "?days=1");
    expect(body.days).toEqual([
      {
        date: today(),
        attempts: 5,
        started: 0,
        refused: { invalid_request: 4, rate_limited: 1 },
        minutes: 0,
      },
    ]);
    expect(body.topRefusedOrigins).toEqual([{ origin: "https://shop.example.com", count: 5 }]);
  });

  test("a rate-limited attempt counts under rate_limited when its body carries the valid key", async () => {
    const org = await seedOrganization(w.ctx, { cap: 100 });
    const address = freshAddress();
    const codes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const json =
        i < 6
          ? {
              publishableKey: org.publishable.key,
              captchaToken: w.captcha.token(`nope-${++tokens}`, { success: false }),
            }
          : { publishableKey: org.publishable.key, captchaToken: good() };
      codes.push(await outcomeOf(await startCall(w.ctx, json, { address })));
    }
    // And one more with a revoked-looking (unknown) key from the same address: nobody's.
    codes.push(
      await outcomeOf(
        await startCall(
          w.ctx,
          { publishableKey: `inf_pub_${"1".repeat(43)}`, captchaToken: good() },
          { address },
        ),
      ),
    );
    expect(codes).toEqual([...Array(6).fill("400 invalid_captcha"), ...Array(3).fill("429 rate_limited")]);
    const day = (await stats(org.publishable.id, "?days=1")).days;
    expect(day).toEqual([
      {
        date: today(),
        attempts: 8,
        started: 0,
        refused: { invalid_captcha: 6, rate_limited: 2 },
        minutes: 0,
      },
    ]);
  });

  test("a revoked key's attempts count under invalid_key, or rate_limited when the rate limit refuses first", async () => {
    const org = await seedOrganization(w.ctx, { cap: 100 });
    const attempt = (opts: Parameters<typeof startCall>[2] = {}) =>
      startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() }, opts).then(outcomeOf);
    expect(await attempt()).toBe("201 ok");
    const revoked = await admin(w.ctx, "POST", `/publishable-keys/${org.publishable.id}/revoke`);
    expect(revoked.status).toBe(201);
    expect(revoked.body).toMatchObject({ id: org.publishable.id, revoked: true });
    // The leaked key, still embedded on the shop and copied elsewhere; then one address tries too often.
    const codes = [await attempt({ origin: "https://copycat.example.net" })];
    const address = freshAddress();
    for (let i = 0; i < 7; i++) codes.push(await attempt({ address }));
    expect(codes).toEqual([...Array(7).fill("401 invalid_key"), "429 rate_limited"]);
    const body = await stats(org.publishable.id, "?days=1");
    expect(body.days).toEqual([
      {
        date: today(),
        attempts: 9,
        started: 1,
        refused: { invalid_key: 7, rate_limited: 1 },
        minutes: 10,
      },
    ]);
    expect(body.topRefusedOrigins).toEqual([
      { origin: "https://shop.example.com", count: 7 },
      { origin: "https://copycat.example.net", count: 1 },
    ]);
    // Only the start went through the bot check.
    expect(body.captchaScores.reduce((a: number, b: number) => a + b, 0)).toBe(1);
  });

  test("a key whose monthly cap is used up, and an organization whose plan minutes are, count under their codes", async () => {
    // A cap of 3 minutes: the first call reserves them all, the next one is refused by the key.
    const capped = await seedOrganization(w.ctx, { cap: 3, planMinutes: 1000 });
    // A plan of 2 minutes: the first call reserves them all, the next one is refused by the plan.
    const spent = await seedOrganization(w.ctx, { cap: 100, planMinutes: 2 });
    const codes: string[] = [];
    for (const org of [capped, spent]) {
      for (let i = 0; i < 2; i++) {
        codes.push(
          await outcomeOf(
            await startCall(w.ctx, { publishableKey: org.publishable.key, captchaToken: good() }),
          ),
        );
      }
    }
    expect(codes).toEqual(["201 ok", "429 minute_cap_reached", "201 ok", "403 plan_minutes_exhausted"]);
    expect((await stats(capped.publishable.id, "?days=1")).days).toEqual([
      { date: today(), attempts: 2, started: 1, refused: { minute_cap_reached: 1 }, minutes: 3 },
    ]);
    expect((await stats(spent.publishable.id, "?days=1")).days).toEqual([
      { date: today(), attempts: 2, started: 1, refused: { plan_minutes_exhausted: 1 }, minutes: 2 },
    ]);
  });

  test("a key's lastUsedAt in the operators' list is its latest attempt", async () => {
    const { body } = await admin(w.ctx, "GET", `/organizations/${seed.org.id}/publishable-keys`);
    const [row] = await w.ctx.deps.sql<{ last: Date }[]>`
      select max(last_attempt_at) as last from publishable_key_daily_stats
      where publishable_key_id = ${seed.publishable.id}`;
    expect(body.data[0].lastUsedAt).toBe(row!.last.toISOString());
    expect(Date.now() - Date.parse(body.data[0].lastUsedAt)).toBeLessThan(60_000);
  });
});

describe("exact and bounded", () => {
  test("parallel refused attempts from two processes are all counted", async () => {
    const seed = await seedOrganization(w.ctx, { cap: 100 });
    // The embedded database serves one process: there both "processes" share its connection.
    const otherSql = w.ctx.db.url ? postgres(w.ctx.db.url, { ...driverOptions, max: 10 }) : w.ctx.db.sql;
    try {
      const other = createApp(composeDeps({ sql: otherSql, env: w.ctx.deps.env, log: w.ctx.deps.log }));
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) => {
          const req = new Request("http://localhost/api/v1/web-calls", {
            method: "POST",
            headers: { "content-type": "application/json", origin: "https://copycat.example.net" },
            body: JSON.stringify({ publishableKey: seed.publishable.key, captchaToken: "x" }),
          });
          const app = i % 2 ? other : w.ctx.app;
          return Promise.resolve(app.fetch(req, { remoteAddress: freshAddress() }));
        }),
      );
      expect(results.every((r) => r.status === 403)).toBe(true);
    } finally {
      if (otherSql !== w.ctx.db.sql) await otherSql.end();
    }
    const body = await stats(seed.publishable.id, "?days=1");
    expect(body.days[0]).toMatchObject({ attempts: 40, refused: { origin_not_allowed: 40 } });
    expect(body.topRefusedOrigins).toEqual([{ origin: "https://copycat.example.net", count: 40 }]);
  });

  test(`at most ${MAX_ORIGINS_PER_DAY} origins a day are kept; the others are counted together`, async () => {
    const seed = await seedOrganization(w.ctx, { cap: 100 });
    const at = new Date();
    for (let i = 0; i < MAX_ORIGINS_PER_DAY + 5; i++) {
      const origin = `https://o${i}.example.org`;
      await countKeyAttempt(
        w.ctx.deps.sql,
        { id: seed.publishable.id },
        {
          at,
          outcome: { refused: "origin_not_allowed", origin },
          captchaScore: null,
        },
      );
      // The first origin comes back often: it stays first.
      if (i % 10 === 0) {
        await countKeyAttempt(
          w.ctx.deps.sql,
          { id: seed.publishable.id },
          {
            at,
            outcome: { refused: "origin_not_allowed", origin: "https://o0.example.org" },
            captchaScore: null,
          },
        );
      }
    }
    const [row] = await w.ctx.deps.sql<{ n: number }[]>`
      select count(*)::int as n from publishable_key_daily_stats, jsonb_object_keys(refused_origins)
      where publishable_key_id = ${seed.publishable.id}`;
    expect(row!.n).toBe(MAX_ORIGINS_PER_DAY + 1);
    const body = await stats(seed.publishable.id, "?days=1");
    expect(body.topRefusedOrigins).toHaveLength(10);
    expect(body.topRefusedOrigins[0]).toEqual({ origin: "https://o0.example.org", count: 12 });
    expect(body.topRefusedOrigins[1]).toEqual({ origin: OTHER_ORIGINS, count: 5 });
  });
});

describe("refusals of the stats route", () => {
  test("bad days is 400 invalid_query; an unknown or secret key id is 404", async () => {
    const seed = await seedOrganization(w.ctx);
    for (const days of ["0", "91", "x", "1.5", ""]) {
      const { status, body } = await admin(
        w.ctx,
        "GET",
        `/publishable-keys/${seed.publishable.id}/stats?days=${days}`,
      );
      expect(`${days}: ${status} ${body.error.code} ${body.error.param}`).toBe(
        `${days}: 400 invalid_query days`,
      );
    }
    expect((await stats(seed.publishable.id, "?days=90")).days).toHaveLength(90);
    // The same from the command line.
    const cli = await runAdmin(["publishable-key-stats", seed.publishable.id, "--days", "7"], w.ctx.deps);
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual(await stats(seed.publishable.id, "?days=7"));
    const wrong = await runAdmin(["publishable-key-stats", seed.publishable.id, "--days", "0"], w.ctx.deps);
    expect(JSON.parse(wrong.stderr).error).toMatchObject({ code: "invalid_query", param: "days" });
    for (const id of [seed.live.id, "key_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "nope"]) {
      const { status, body } = await admin(w.ctx, "GET", `/publishable-keys/${id}/stats`);
      expect(`${status} ${body.error.code}`).toBe("404 not_found");
    }
  });
});
