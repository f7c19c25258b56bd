import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { findSessionToken, redeemSessionToken } from "../../src/services/sessionTokens.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { mint, TOKEN_RE } from "./helpers.ts";

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

const idem = (key: string) => ({ "Idempotency-Key": key });

async function count(table: "session_tokens" | "session_idempotency_keys"): Promise<number> {
  const [row] = await ctx.db.sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table}`);
  return row!.n;
}

describe("Idempotency-Key on POST /api/v1/web-call-sessions", () => {
  test("a replay returns the first answer, same token and expiresAt, with Idempotent-Replayed: true", async () => {
    const first = await mint(ctx, seed.liveKey, { agentId: seed.agent.id, variables: { a: 1 } }, idem("k-1"));
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const a = await first.json();
    expect(a.token).toMatch(TOKEN_RE);
    const tokensBefore = await count("session_tokens");
    clock.advance(30_000);
    const again = await mint(ctx, seed.liveKey, { agentId: seed.agent.id, variables: { a: 1 } }, idem("k-1"));
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(a);
    expect(await count("session_tokens")).toBe(tokensBefore);
  });

  test("the replay holds after the token expired and after it was used", async () => {
    const first = await (await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, idem("k-used"))).json();
    const spent = await redeemSessionToken(ctx.db.sql, first.token, clock);
    expect(spent).not.toBeNull();
    expect(await findSessionToken(ctx.db.sql, first.token, clock)).toBeNull();
    const afterUse = await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, idem("k-used"));
    expect(afterUse.headers.get("idempotent-replayed")).toBe("true");
    expect(await afterUse.json()).toEqual(first);

    clock.advance(6 * 60_000);
    const afterExpiry = await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, idem("k-used"));
    expect(afterExpiry.status).toBe(201);
    expect(await afterExpiry.json()).toEqual(first);
  });

  test("the same variables in another key order are the same request", async () => {
    const body1 = { agentId: seed.agent.id, variables: { a: 1, b: "two", c: null } };
    const body2 = { variables: { c: null, b: "two", a: 1 }, agentId: seed.agent.id };
    const a = await (await mint(ctx, seed.liveKey, body1, idem("k-order"))).json();
    const res = await mint(ctx, seed.liveKey, body2, idem("k-order"));
    expect(res.headers.get("idempotent-replayed")).toBe("true");
    expect((await res.json()).token).toBe(a.token);
  });

  test("the same key with a different body is 409 idempotency_key_reused", async () => {
    await mint(ctx, seed.liveKey, { agentId: seed.agent.id, variables: { a: 1 } }, idem("k-conflict"));
    for (const body of [
      { agentId: seed.agent.id, variables: { a: 2 } },
      { agentId: seed.agent.id },
      { agentId: seed.agent.id, variables: { a: "1" } },
    ]) {
      await expectApiError(
        await mint(ctx, seed.liveKey, body, idem("k-conflict")),
        409,
        "idempotency_key_reused",
      );
    }
  });

  test("keys are scoped to organization and mode", async () => {
    const live = await (await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, idem("k-scope"))).json();
    const testRes = await mint(ctx, seed.testKey, { agentId: seed.agent.id }, idem("k-scope"));
    expect(testRes.headers.get("idempotent-replayed")).toBeNull();
    const test_ = await testRes.json();
    expect(test_.livemode).toBe(false);
    expect(test_.token).not.toBe(live.token);

    const other = await seedOrganization(ctx);
    const otherRes = await mint(ctx, other.liveKey, { agentId: other.agent.id }, idem("k-scope"));
    expect(otherRes.status).toBe(201);
    expect(otherRes.headers.get("idempotent-replayed")).toBeNull();
    expect((await otherRes.json()).token).not.toBe(live.token);
  });

  test("a record is kept 24 hours: afterwards the same key mints a new token", async () => {
    const first = await (await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, idem("k-day"))).json();
    clock.advance(24 * 3600_000 - 1000);
    const within = await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, idem("k-day"));
    expect((await within.json()).token).toBe(first.token);
    clock.advance(2000);
    const after = await mint(
      ctx,
      seed.liveKey,
      { agentId: seed.agent.id, variables: { x: 1 } },
      idem("k-day"),
    );
    expect(after.status).toBe(201);
    expect(after.headers.get("idempotent-replayed")).toBeNull();
    const fresh = await after.json();
    expect(fresh.token).not.toBe(first.token);
    expect(await findSessionToken(ctx.db.sql, fresh.token, clock)).not.toBeNull();
  });

  test("only successful answers are kept: a refused request leaves the key free", async () => {
    const s = await seedOrganization(ctx, { paidPlan: false });
    const refused = await mint(ctx, s.liveKey, { agentId: s.agent.id }, idem("k-refused"));
    await expectApiError(refused, 403, "plan_required");
    const notFound = await mint(ctx, s.liveKey, { agentId: "agt_unknown" }, idem("k-refused"));
    await expectApiError(notFound, 404, "not_found", { param: "agentId" });
    await updateOrganization(ctx.deps, s.org.id, { paidPlan: true });
    const ok = await mint(
      ctx,
      s.liveKey,
      { agentId: s.agent.id, variables: { any: "body" } },
      idem("k-refused"),
    );
    expect(ok.status).toBe(201);
    expect(ok.headers.get("idempotent-replayed")).toBeNull();
  });

  test("Idempotency-Key must be 1 to 255 printable ASCII characters, else 400 invalid_request", async () => {
    const ok = await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, idem(`~ ${"k".repeat(253)}`));
    expect(ok.status).toBe(201);
    const before = await count("session_idempotency_keys");
    for (const bad of ["", "k".repeat(256), "tab\there", "caf\u00e9", "bell\u0007"]) {
      const headers = new Headers({ "idempotency-key": bad });
      const res = await mint(ctx, seed.liveKey, { agentId: seed.agent.id }, Object.fromEntries(headers));
      await expectApiError(res, 400, "invalid_request", { param: "idempotency-key" });
    }
    expect(await count("session_idempotency_keys")).toBe(before);
  });

  test("20 concurrent requests with one key yield one token, stored once", async () => {
    const tokensBefore = await count("session_tokens");
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        mint(ctx, seed.liveKey, { agentId: seed.agent.id, variables: { n: 1 } }, idem("k-race")),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    const bodies = await Promise.all(results.map((r) => r.json()));
    expect(new Set(bodies.map((b) => b.token)).size).toBe(1);
    expect(new Set(bodies.map((b) => b.expiresAt)).size).toBe(1);
    expect(results.filter((r) => r.headers.get("idempotent-replayed") === "true")).toHaveLength(19);
    expect(await count("session_tokens")).toBe(tokensBefore + 1);
    // The one token is valid and redeemable once.
    expect(await redeemSessionToken(ctx.db.sql, bodies[0].token, clock)).not.toBeNull();
    expect(await redeemSessionToken(ctx.db.sql, bodies[0].token, clock)).toBeNull();
  });

  test("the replayable token is derived, never stored: the database holds only its hash", async () => {
    const { token } = await (
      await mint(ctx, seed.testKey, { agentId: seed.agent.id }, idem("k-stored"))
    ).json();
    const secretPart = token.slice("inf_wcs_".length);
    for (const table of ["session_tokens", "session_idempotency_keys", "server_secrets"]) {
      const [row] = await ctx.db.sql.unsafe<{ n: number }[]>(
        `select count(*)::int as n from ${table} t where t::text like $1`,
        [`%${secretPart}%`],
      );
      expect(row!.n).toBe(0);
    }
  });
});
