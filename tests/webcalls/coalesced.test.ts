import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKey } from "../../src/auth/keys.ts";
import { createAgent } from "../../src/services/agents.ts";
import { hitRateLimit } from "../../src/services/rateLimit.ts";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { newId } from "../helpers/ids.ts";
import {
  freshAddress,
  mintToken,
  type Seed,
  seedOrganization,
  startCall,
  startWorld,
  type WebCallWorld,
} from "./support.ts";

/**
 * Mints and test-token redemptions that arrive together are written several to a statement
 * (db/coalesce.ts). Each request still gets the answer it would have had alone. That they did share
 * statements is read from the rows: one statement is one transaction, so rows written together carry
 * the same `xmin`.
 */

let w: WebCallWorld;
let seed: Seed;

beforeAll(async () => {
  w = await startWorld();
  seed = await seedOrganization(w.ctx);
});
afterAll(() => w.close());

const N = 30;

/** How many transactions wrote the rows of `table` whose `key` (as text) is one of `keys`. */
async function transactionsOf(table: "calls" | "session_tokens", keys: string[]): Promise<number> {
  const { sql } = w.ctx.db;
  const key = table === "calls" ? sql`id` : sql`encode(token_hash, 'hex')`;
  const [row] = await sql<{ n: number }[]>`
    select count(distinct xmin::text)::int as n from ${sql(table)} where ${key} = any(${keys})`;
  return row!.n;
}

describe("mints that arrive together", () => {
  test("share statements; an unknown agent among them is 404 alone and every other token works", async () => {
    const unknownAgent = newId("agt");
    const bodies = Array.from({ length: N }, (_, i) => ({
      agentId: i === 7 ? unknownAgent : seed.agent.id,
      variables: { n: i, ...(i % 2 ? { language: "fr" } : {}) },
    }));
    const responses = await Promise.all(
      bodies.map((json) =>
        w.ctx.request("/api/v1/web-call-sessions", { method: "POST", key: seed.testKey, json }),
      ),
    );
    await expectApiError(responses[7]!, 404, "not_found", { param: "agentId" });
    const minted = await Promise.all(
      responses
        .filter((_, i) => i !== 7)
        .map(async (r) => {
          expect(r.status).toBe(201);
          return ((await r.json()) as { token: string; expiresAt: string }).token;
        }),
    );
    expect(new Set(minted).size).toBe(N - 1);

    const hashes = await w.ctx.db.sql<
      { token_hash: Uint8Array; language: string | null; variables: { n: number } }[]
    >`
      select token_hash, language, variables from session_tokens where created_at > now() - interval '1 minute'
        and variables ? 'n'`;
    expect(hashes.length).toBe(N - 1);
    for (const row of hashes) expect(row.language).toBe(row.variables.n % 2 ? "fr" : null);
    const hex = hashes.map((h) => Buffer.from(h.token_hash).toString("hex"));
    expect(await transactionsOf("session_tokens", hex)).toBeLessThan(N - 1);

    // Each token redeems, once.
    const started = await Promise.all(minted.map((sessionToken) => startCall(w.ctx, { sessionToken })));
    expect((await Promise.all(started.map(outcomeOf))).every((c) => c === "201 ok")).toBe(true);
  });
});

describe("test-token redemptions that arrive together", () => {
  test("share statements, and each gets its own answer: call, live, 503, 401, 429", async () => {
    const tokens = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        mintToken(w.ctx, seed.testKey, seed.agent.id, { n: i, language: "fr" }),
      ),
    );
    const live = await mintToken(w.ctx, seed.liveKey, seed.agent.id, { secret: "for the agent" });
    const idle = await createAgent(w.ctx.deps, seed.org.id, { name: "Idle", active: false });
    const idleToken = await mintToken(w.ctx, seed.testKey, idle.id);
    const spent = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    expect((await startCall(w.ctx, { sessionToken: spent })).status).toBe(201);
    const unknown = (await generateKey("sessionToken")).key;
    const limitedToken = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    const limitedAddress = freshAddress();
    for (let i = 0; i < 6; i++) await hitRateLimit(w.ctx.deps.sql, w.ctx.deps.clock, limitedAddress);

    const addresses = tokens.map(() => freshAddress());
    const requests = [
      ...tokens.map((sessionToken, i) => startCall(w.ctx, { sessionToken }, { address: addresses[i]! })),
      startCall(w.ctx, { sessionToken: live }),
      startCall(w.ctx, { sessionToken: idleToken }),
      startCall(w.ctx, { sessionToken: spent }),
      startCall(w.ctx, { sessionToken: unknown }),
      startCall(w.ctx, { sessionToken: limitedToken }, { address: limitedAddress }),
    ];
    const responses = await Promise.all(requests);
    const codes = await Promise.all(responses.map(outcomeOf));
    expect(codes.slice(0, N)).toEqual(Array(N).fill("201 ok"));
    expect(codes.slice(N)).toEqual([
      "201 ok",
      "503 agent_unavailable",
      "401 invalid_session_token",
      "401 invalid_session_token",
      "429 rate_limited",
    ]);
    expect(Number(responses[N + 4]!.headers.get("retry-after"))).toBeGreaterThan(0);

    const simulated = (await Promise.all(responses.slice(0, N).map((r) => r.json()))) as {
      callId: string;
      simulated: boolean;
      maxSeconds: number;
    }[];
    expect(simulated.every((b) => b.simulated && b.maxSeconds === 600)).toBe(true);
    const liveBody = (await responses[N]!.json()) as { room?: { name: string }; simulated?: boolean };
    expect(liveBody.simulated).toBeUndefined();
    expect(liveBody.room).toBeDefined();

    // Each simulated call is its token's, with its variables, language and first timer.
    const callIds = simulated.map((b) => b.callId);
    const calls = await w.ctx.db.sql<
      { id: string; variables: { n: number }; language: string; status: string; spent_by: string }[]
    >`
      select c.id, c.variables, c.language, c.status, t.call_id as spent_by
      from calls c join session_tokens t on t.call_id = c.id where c.id = any(${callIds})`;
    expect(calls.length).toBe(N);
    for (const call of calls) {
      expect(call.spent_by).toBe(call.id);
      expect(call.language).toBe("fr");
    }
    // Each answer names the call of its own token: request k's call carries the variables minted as k.
    const byId = new Map(calls.map((c) => [c.id, c.variables.n]));
    expect(callIds.map((id) => byId.get(id))).toEqual(tokens.map((_, k) => k));
    // Each request's hit was counted once, the refused one not at all.
    const windows = await w.ctx.db.sql<{ address: string; n: number }[]>`
      select address, cardinality(hits)::int as n from rate_limit_windows
      where address = any(${[...addresses, limitedAddress]})`;
    const hits = new Map(windows.map((r) => [r.address, r.n]));
    expect(addresses.map((a) => hits.get(a))).toEqual(addresses.map(() => 1));
    expect(hits.get(limitedAddress)).toBe(6);
    const timers = await w.ctx.db.sql<{ call_id: string }[]>`
      select payload->>'callId' as call_id from timers where payload->>'callId' = any(${callIds})`;
    expect(timers.map((t) => t.call_id).sort()).toEqual([...callIds].sort());
    expect(await transactionsOf("calls", callIds)).toBeLessThan(N);

    // Refused requests spent nothing: the idle agent's and the rate-limited tokens are still valid.
    expect(await outcomeOf(await startCall(w.ctx, { sessionToken: limitedToken }))).toBe("201 ok");
    const [idleRow] = await w.ctx.db.sql<{ spent_at: Date | null }[]>`
      select spent_at from session_tokens where agent_id = ${idle.id}`;
    expect(idleRow!.spent_at).toBeNull();
  });

  test("one token in many requests from many addresses, among other tokens: one call per token", async () => {
    const shared = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    const others = await Promise.all(
      Array.from({ length: 10 }, () => mintToken(w.ctx, seed.testKey, seed.agent.id)),
    );
    const requests = [...Array.from({ length: 20 }, () => shared), ...others].map((sessionToken) =>
      startCall(w.ctx, { sessionToken }).then(outcomeOf),
    );
    const codes = await Promise.all(requests);
    expect(codes.slice(0, 20).filter((c) => c === "201 ok").length).toBe(1);
    expect(codes.slice(0, 20).filter((c) => c === "401 invalid_session_token").length).toBe(19);
    expect(codes.slice(20)).toEqual(Array(10).fill("201 ok"));
  });
});
