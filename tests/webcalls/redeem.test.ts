import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sha256 } from "../../src/auth/keys.ts";
import { ManualClock } from "../../src/clock.ts";
import { ApiError } from "../../src/errors.ts";
import { assertAgentAvailable, assertPaidPlan } from "../../src/services/admission.ts";
import { updateAgent } from "../../src/services/agents.ts";
import { createSecretKey, revokeSecretKey } from "../../src/services/keys.ts";
import { reserveMinutes, usedMinutes } from "../../src/services/minutes.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import {
  hitRateLimit,
  rateLimitHit,
  WEB_CALL_RATE_LIMIT,
  WebCallRateLimit,
} from "../../src/services/rateLimit.ts";
import {
  findSessionToken,
  redeemSessionToken,
  withRedeemedSessionToken,
} from "../../src/services/sessionTokens.ts";
import { startWithSessionToken } from "../../src/services/webCalls.ts";
import type { TimerScheduler } from "../../src/timers/scheduler.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { newId } from "../helpers/ids.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx, { planMinutes: 1000 });
});
afterAll(() => ctx.close());

async function mintToken(
  key = seed.liveKey,
  body: Record<string, unknown> = { agentId: seed.agent.id, variables: { name: "Ada" } },
): Promise<string> {
  const res = await ctx.request("/api/v1/web-call-sessions", { method: "POST", key, json: body });
  expect(res.status).toBe(201);
  return (await res.json()).token;
}

const codeOf = (err: unknown) => (err instanceof ApiError ? err.code : String(err));

describe("redeemSessionToken", () => {
  test("claims a valid token once and hands over what the call needs", async () => {
    const token = await mintToken();
    const callId = newId("call", clock);
    const session = await redeemSessionToken(ctx.db.sql, token, clock, { callId });
    expect(session).toMatchObject({
      organizationId: seed.org.id,
      livemode: true,
      agentId: seed.agent.id,
      secretKeyId: seed.live.id,
      variables: { name: "Ada" },
    });
    expect(session!.expiresAt.toISOString()).toBe("2026-11-21T09:35:00.000Z");
    const [row] = await ctx.db.sql<{ spent_at: Date; call_id: string }[]>`
      select spent_at, call_id from session_tokens where token_hash = ${session!.tokenHash}`;
    expect(row!.spent_at.toISOString()).toBe(clock.now().toISOString());
    expect(row!.call_id).toBe(callId);
    expect(await redeemSessionToken(ctx.db.sql, token, clock)).toBeNull();
    expect(await findSessionToken(ctx.db.sql, token, clock)).toBeNull();
  });

  test("a test token redeems with livemode false", async () => {
    const token = await mintToken(seed.testKey);
    expect((await redeemSessionToken(ctx.db.sql, token, clock))?.livemode).toBe(false);
  });

  test("20 parallel redeemers: exactly one wins", async () => {
    const token = await mintToken();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => ctx.db.sql.begin((tx) => redeemSessionToken(tx, token, clock))),
    );
    expect(results.filter((r) => r !== null)).toHaveLength(1);
  });

  test("valid for five minutes: expired one millisecond after", async () => {
    const token = await mintToken();
    clock.advance(5 * 60_000 - 1);
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();
    clock.advance(1);
    expect(await findSessionToken(ctx.db.sql, token, clock)).toBeNull();
    expect(await redeemSessionToken(ctx.db.sql, token, clock)).toBeNull();
  });

  test("wrong, malformed and non-string tokens are refused without error", async () => {
    const wrong = `inf_wcs_${"A".repeat(43)}`;
    for (const t of [wrong, "inf_wcs_short", "", null, 42, { token: wrong }, seed.liveKey]) {
      expect(await findSessionToken(ctx.db.sql, t, clock)).toBeNull();
      expect(await redeemSessionToken(ctx.db.sql, t, clock)).toBeNull();
    }
  });

  test("revoking the key that minted a token invalidates the token", async () => {
    const s = await seedOrganization(ctx);
    const token = await mintToken(s.liveKey, { agentId: s.agent.id });
    await revokeSecretKey({ ...ctx.deps, clock }, s.live.id);
    expect(await findSessionToken(ctx.db.sql, token, clock)).toBeNull();
    expect(await redeemSessionToken(ctx.db.sql, token, clock)).toBeNull();
  });
});

describe("withRedeemedSessionToken: the session form up to the start of the call", () => {
  test("a refusal inside prepare leaves the token valid; success then spends it", async () => {
    const token = await mintToken();
    const refuse = withRedeemedSessionToken(ctx.db.sql, token, clock, async () => {
      throw new ApiError("plan_minutes_exhausted", "no minutes");
    });
    expect(codeOf(await refuse.catch((e) => e))).toBe("plan_minutes_exhausted");
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();

    const { session, prepared } = await withRedeemedSessionToken(
      ctx.db.sql,
      token,
      clock,
      async (_tx, s) => ({
        agentId: s.agentId,
      }),
    );
    expect(prepared).toEqual({ agentId: seed.agent.id });
    expect(session.variables).toEqual({ name: "Ada" });
    expect(await findSessionToken(ctx.db.sql, token, clock)).toBeNull();
  });

  test("an invalid token is 401 invalid_session_token and prepare never runs", async () => {
    let ran = false;
    const err = await withRedeemedSessionToken(ctx.db.sql, `inf_wcs_${"B".repeat(43)}`, clock, async () => {
      ran = true;
    }).catch((e) => e);
    expect(codeOf(err)).toBe("invalid_session_token");
    expect((err as ApiError).status).toBe(401);
    expect(ran).toBe(false);
  });

  test("a failure while starting the call (after the transaction) leaves the token spent", async () => {
    const token = await mintToken();
    const startCall = async () => {
      throw new Error("media server down");
    };
    const attempt = async () => {
      const { session } = await withRedeemedSessionToken(ctx.db.sql, token, clock, async () => null);
      try {
        await startCall();
      } catch {
        throw new ApiError("call_start_failed", `could not start the call for ${session.agentId}`);
      }
    };
    expect(codeOf(await attempt().catch((e) => e))).toBe("call_start_failed");
    expect(await findSessionToken(ctx.db.sql, token, clock)).toBeNull();
    expect(codeOf(await attempt().catch((e) => e))).toBe("invalid_session_token");
  });

  test("20 parallel uses: one starts, 19 are 401, and prepare ran once", async () => {
    const token = await mintToken();
    let prepared = 0;
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, () =>
        withRedeemedSessionToken(ctx.db.sql, token, clock, async () => {
          prepared++;
        }),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(refused.map((r) => codeOf(r.reason))).toEqual(Array(19).fill("invalid_session_token"));
    expect(prepared).toBe(1);
  });

  test("20 parallel uses all refused for plan minutes: every one gets the refusal and the token stays valid", async () => {
    const s = await seedOrganization(ctx, { planMinutes: 0 });
    const token = await mintToken(s.liveKey, { agentId: s.agent.id });
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, () =>
        withRedeemedSessionToken(ctx.db.sql, token, clock, (tx, session) =>
          reserveMinutes(tx, clock, {
            callId: newId("call", clock),
            organizationId: session.organizationId,
            livemode: session.livemode,
          }),
        ),
      ),
    );
    const codes = results.map((r) => (r.status === "rejected" ? codeOf(r.reason) : "fulfilled"));
    expect(codes).toEqual(Array(20).fill("plan_minutes_exhausted"));
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();
    const [n] = await ctx.db.sql<{ n: number }[]>`
      select count(*)::int as n from minute_reservations where organization_id = ${s.org.id}`;
    expect(n!.n).toBe(0);
  });

  test("the session form's checks composed in order: paid plan → agent → plan minutes, each refusal leaving the token valid", async () => {
    const s = await seedOrganization(ctx, { planMinutes: 0 });
    const token = await mintToken(s.liveKey, { agentId: s.agent.id });
    const c = { ...ctx.deps, clock };
    const use = () =>
      withRedeemedSessionToken(ctx.db.sql, token, clock, async (tx, session) => {
        if (session.livemode) await assertPaidPlan(tx, session.organizationId);
        await assertAgentAvailable(tx, session.organizationId, session.agentId, {
          livemode: session.livemode,
          mediaServerConfigured: true,
        });
        return reserveMinutes(tx, clock, {
          callId: newId("call", clock),
          organizationId: session.organizationId,
          livemode: session.livemode,
        });
      }).catch((e) => e);

    await updateOrganization(c, s.org.id, { paidPlan: false });
    await updateAgent(c, s.agent.id, { active: false });
    expect(codeOf(await use())).toBe("plan_required");
    await updateOrganization(c, s.org.id, { paidPlan: true });
    expect(codeOf(await use())).toBe("agent_unavailable");
    await updateAgent(c, s.agent.id, { active: true });
    expect(codeOf(await use())).toBe("plan_minutes_exhausted");
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();
    await updateOrganization(c, s.org.id, { paidPlan: true, planMinutes: 3 });
    const started = await use();
    expect(started.prepared).toEqual({ maxSeconds: 180, reservedMinutes: 3 });
    expect(await usedMinutes(ctx.db.sql, clock, { organizationId: s.org.id })).toBe(3);
    expect(await findSessionToken(ctx.db.sql, token, clock)).toBeNull();
  });

  test("the token, the keys and the hash never reach the logs while minting and redeeming", async () => {
    ctx.logs.length = 0;
    const token = await mintToken();
    await withRedeemedSessionToken(ctx.db.sql, token, clock, async () => null);
    await withRedeemedSessionToken(ctx.db.sql, token, clock, async () => null).catch(() => {});
    const all = ctx.logs.join("\n");
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain(token);
    expect(all).not.toContain(token.slice(-24));
    expect(all).not.toContain(seed.liveKey.slice(-24));
  });
});

describe("a test token: the claim checks its agent", () => {
  const c = () => ({ ...ctx.deps, clock });
  let addressSeq = 0;
  let lastAddress = "";
  const hitFrom = (address: string) =>
    new WebCallRateLimit(rateLimitHit(ctx.deps.sql, clock, address, WEB_CALL_RATE_LIMIT));
  /** The rate-limit hit the route's gate makes per request, here from an address of its own. */
  const freshHit = () => {
    lastAddress = `2001:db8::${(++addressSeq).toString(16)}`;
    return hitFrom(lastAddress);
  };
  const start = (token: string) => startWithSessionToken(ctx.deps, token, freshHit());
  const spentCount = async (orgId: string) => {
    const [row] = await ctx.db.sql<{ n: number }[]>`
      select count(*)::int as n from session_tokens where organization_id = ${orgId} and spent_at is not null`;
    return row!.n;
  };

  test("an inactive agent: the claim takes nothing, 503 agent_unavailable, and the token works once it is active", async () => {
    const s = await seedOrganization(ctx, { agentActive: false });
    const token = await mintToken(s.testKey, { agentId: s.agent.id });
    expect(await redeemSessionToken(ctx.db.sql, token, clock)).toBeNull();
    let ran = false;
    const refused = await withRedeemedSessionToken(ctx.db.sql, token, clock, async () => {
      ran = true;
    }).catch((e) => e);
    expect(codeOf(refused)).toBe("agent_unavailable");
    expect((refused as ApiError).status).toBe(503);
    expect(ran).toBe(false);
    expect(codeOf(await start(token).catch((e) => e))).toBe("agent_unavailable");
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();
    expect(await spentCount(s.org.id)).toBe(0);

    await updateAgent(c(), s.agent.id, { active: true, language: "fr" });
    const started = await start(token);
    expect(started).toMatchObject({ simulated: true, livemode: false, maxSeconds: 600 });
    const [call] = await ctx.db.sql<{ language: string; agent_id: string }[]>`
      select language, agent_id from calls where id = ${started.callId}`;
    expect(call).toEqual({ language: "fr", agent_id: s.agent.id });
    expect(await findSessionToken(ctx.db.sql, token, clock)).toBeNull();
    expect(codeOf(await start(token).catch((e) => e))).toBe("invalid_session_token");
  });

  test("the call's language: the `language` variable given at mint, else the agent's language when the call starts", async () => {
    const s = await seedOrganization(ctx);
    const asked = await mintToken(s.testKey, { agentId: s.agent.id, variables: { language: " Français " } });
    const english = await mintToken(s.testKey, { agentId: s.agent.id, variables: { language: "en-GB" } });
    const unsaid = await mintToken(s.testKey, { agentId: s.agent.id, variables: { language: 42 } });
    await updateAgent(c(), s.agent.id, { language: "fr" });
    const languageOf = async (token: string) => {
      const { callId } = await start(token);
      const [call] = await ctx.db.sql<{ language: string; variables: Record<string, unknown> }[]>`
        select language, variables from calls where id = ${callId}`;
      return call!;
    };
    expect(await languageOf(asked)).toEqual({ language: "fr", variables: { language: " Français " } });
    expect((await languageOf(english)).language).toBe("en");
    expect((await languageOf(unsaid)).language).toBe("fr");
  });

  test("a spent, expired or revoked test token is 401 even when its agent is inactive", async () => {
    const s = await seedOrganization(ctx);
    const spent = await mintToken(s.testKey, { agentId: s.agent.id });
    await start(spent);
    const expired = await mintToken(s.testKey, { agentId: s.agent.id });
    await ctx.db.sql`
      update session_tokens set expires_at = ${new Date(clock.now().getTime() - 1)}
      where spent_at is null and organization_id = ${s.org.id}`;
    const k = await createSecretKey(c(), s.org.id, { mode: "test", scopes: ["*"] });
    const revoked = await mintToken(k.key, { agentId: s.agent.id });
    await revokeSecretKey(c(), k.id);
    await updateAgent(c(), s.agent.id, { active: false });
    for (const token of [spent, expired, revoked, `inf_wcs_${"C".repeat(43)}`]) {
      expect(codeOf(await start(token).catch((e) => e))).toBe("invalid_session_token");
    }
  });

  test("a live token is claimed whatever its agent: the agent is checked after the claim, and a refusal rolls it back", async () => {
    const s = await seedOrganization(ctx, { agentActive: false });
    const token = await mintToken(s.liveKey, { agentId: s.agent.id });
    const claimed = await ctx.db.sql
      .begin(async (tx) => {
        const session = await redeemSessionToken(tx, token, clock);
        throw Object.assign(new Error("roll the claim back"), { session });
      })
      .catch((e) => e.session);
    expect(claimed?.agent).toEqual({ active: false, language: "en" });
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();
    expect(codeOf(await startWithSessionToken(ctx.deps, token, freshHit()).catch((e) => e))).toBe(
      "agent_unavailable",
    );
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();
  });

  test("the rate-limit hit, the spend, the call and its timer are written by one transaction", async () => {
    const token = await mintToken(seed.testKey);
    const { callId } = await start(token);
    const hash = sha256(token);
    const [row] = await ctx.db.sql<{ token: string; call: string; timer: string; hit: string }[]>`
      select (select xmin::text from session_tokens where token_hash = ${hash}) as token,
             (select xmin::text from calls where id = ${callId}) as call,
             (select xmin::text from timers where payload->>'callId' = ${callId}) as timer,
             (select xmin::text from rate_limit_windows where address = ${lastAddress}) as hit`;
    expect(row!.call).toBe(row!.token);
    expect(row!.timer).toBe(row!.token);
    expect(row!.hit).toBe(row!.token);
  });

  test("a refused rate-limit hit: 429 with Retry-After, nothing claimed or written, the token still valid", async () => {
    const token = await mintToken(seed.testKey);
    const address = "2001:db8::ffff";
    for (let i = 0; i < WEB_CALL_RATE_LIMIT.limit; i++) await hitRateLimit(ctx.deps.sql, clock, address);
    const callCount = async () =>
      (await ctx.db.sql<{ n: number }[]>`select count(*)::int as n from calls`)[0]!.n;
    const before = await callCount();
    const refused = await startWithSessionToken(ctx.deps, token, hitFrom(address)).catch((e) => e);
    expect(codeOf(refused)).toBe("rate_limited");
    expect((refused as ApiError).headers).toEqual({ "Retry-After": "600" });
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();
    expect(await callCount()).toBe(before);
    // The same token from another address starts its call.
    expect(await start(token)).toMatchObject({ simulated: true, livemode: false });
  });

  test("a failure of the timer's insert rolls the call back and leaves the token valid", async () => {
    const s = await seedOrganization(ctx);
    const token = await mintToken(s.testKey, { agentId: s.agent.id });
    const failing: TimerScheduler = {
      schedule: async (sql) => {
        await sql`select 1 / 0`;
        throw new Error("unreachable");
      },
      insertFrom: (sql, rows) => sql`select 1 / (count(*) - count(*)) as failed from (${rows}) r`,
      scheduled: () => {
        throw new Error("unreachable");
      },
      cancel: async () => false,
      cancelled: () => {},
      soon: () => {},
    };
    const timers = ctx.deps.timers;
    ctx.deps.timers = failing;
    try {
      expect(String(await start(token).catch((e) => e))).toContain("division by zero");
    } finally {
      ctx.deps.timers = timers;
    }
    const [calls] = await ctx.db.sql<{ n: number }[]>`
      select count(*)::int as n from calls where organization_id = ${s.org.id}`;
    expect(calls!.n).toBe(0);
    expect(await findSessionToken(ctx.db.sql, token, clock)).not.toBeNull();
    expect((await start(token)).callId).toMatch(/^call_/);
  });

  test("20 parallel uses of a test token: one call, 19 are 401; with its agent inactive all 20 are 503 and it stays valid", async () => {
    const s = await seedOrganization(ctx);
    const token = await mintToken(s.testKey, { agentId: s.agent.id });
    const attempt = () => start(token).then(() => "started", codeOf);
    const results = await Promise.all(Array.from({ length: 20 }, attempt));
    expect(results.filter((r) => r === "started")).toHaveLength(1);
    expect(results.filter((r) => r === "invalid_session_token")).toHaveLength(19);

    const idle = await mintToken(s.testKey, { agentId: s.agent.id });
    await updateAgent(c(), s.agent.id, { active: false });
    const refused = await Promise.all(
      Array.from({ length: 20 }, () => start(idle).then(() => "started", codeOf)),
    );
    expect(refused).toEqual(Array(20).fill("agent_unavailable"));
    expect(await findSessionToken(ctx.db.sql, idle, clock)).not.toBeNull();
    const [calls] = await ctx.db.sql<{ n: number }[]>`
      select count(*)::int as n from calls where organization_id = ${s.org.id}`;
    expect(calls!.n).toBe(1);
  });
});

describe("checks used by the web call", () => {
  test("assertAgentAvailable: inactive agent, unknown agent, or a live call without media server are 503", async () => {
    const c = { ...ctx.deps, clock };
    const s = await seedOrganization(ctx);
    const ok = await assertAgentAvailable(ctx.db.sql, s.org.id, s.agent.id, {
      livemode: true,
      mediaServerConfigured: true,
    });
    expect(ok.id).toBe(s.agent.id);
    const check = (livemode: boolean, mediaServerConfigured: boolean, agentId = s.agent.id) =>
      assertAgentAvailable(ctx.db.sql, s.org.id, agentId, { livemode, mediaServerConfigured }).then(
        () => "ok",
        codeOf,
      );
    expect(await check(true, false)).toBe("agent_unavailable");
    expect(await check(false, false)).toBe("ok");
    expect(await check(false, false, seed.agent.id)).toBe("agent_unavailable");
    await updateAgent(c, s.agent.id, { active: false });
    expect(await check(false, true)).toBe("agent_unavailable");
  });

  test("assertPaidPlan reads the organization now", async () => {
    const s = await seedOrganization(ctx, { paidPlan: false });
    expect(await assertPaidPlan(ctx.db.sql, s.org.id).then(() => "ok", codeOf)).toBe("plan_required");
    await updateOrganization({ ...ctx.deps, clock }, s.org.id, { paidPlan: true });
    expect(await assertPaidPlan(ctx.db.sql, s.org.id).then(() => "ok", codeOf)).toBe("ok");
  });
});
