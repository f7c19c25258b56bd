import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { ApiError } from "../../src/errors.ts";
import { newId } from "../../src/ids.ts";
import { reserveMinutes, usedMinutes } from "../../src/services/minutes.ts";
import {
  assertAgentAvailable,
  assertPaidPlan,
  findSessionToken,
  redeemSessionToken,
  withRedeemedSessionToken,
} from "../../src/services/sessions.ts";
import { revokeSecretKey, updateAgent, updateOrganization } from "../../src/services/tenancy.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { SETUP_TIMEOUT_MS } from "../sessions/helpers.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx, { planMinutes: 1000 });
}, SETUP_TIMEOUT_MS);
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
    await revokeSecretKey({ sql: ctx.deps.sql, clock }, s.live.id);
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

  test("the order of CONTRACT.md §4 composed: paid plan → agent → plan minutes, each refusal leaving the token valid", async () => {
    const s = await seedOrganization(ctx, { planMinutes: 0 });
    const token = await mintToken(s.liveKey, { agentId: s.agent.id });
    const c = { sql: ctx.deps.sql, clock };
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

describe("checks used by the web call", () => {
  test("assertAgentAvailable: inactive agent, unknown agent, or a live call without media server are 503", async () => {
    const c = { sql: ctx.deps.sql, clock };
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
    await updateOrganization({ sql: ctx.deps.sql, clock }, s.org.id, { paidPlan: true });
    expect(await assertPaidPlan(ctx.db.sql, s.org.id).then(() => "ok", codeOf)).toBe("ok");
  });
});
