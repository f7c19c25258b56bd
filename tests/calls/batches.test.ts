import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Coalescer, STATEMENT_COALESCING } from "../../src/db/engine/coalesce.ts";
import { refusedByDatabase } from "../../src/db/engine/connection.ts";
import {
  insertSimulatedCall,
  insertSimulatedCalls,
  type NewSimulatedCall,
  type SimulatedCallInserts,
} from "../../src/db/simulatedCalls.ts";
import type { InsertedTimerRow } from "../../src/db/timers.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { firstStepTimer } from "../../src/services/simulatedCalls.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { outcomeOf } from "../helpers/errors.ts";
import { insertContact, writeCounts } from "./support.ts";

/**
 * Test keys' calls created together share one statement (db/simulatedCalls.ts,
 * `simulatedCallInserts`): each request gets the answer it would have had alone.
 */

let ctx: TestContext;
/** The size of every statement the app sent since the last reset (a request alone: 1). */
let batches: number[] = [];

beforeAll(async () => {
  ctx = await createTestContext();
  const deps = ctx.deps;
  const timer = firstStepTimer(deps);
  // The app's own coalescing, with each statement's size noted.
  deps.batches.simulatedCallInserts = new Coalescer(
    (c: NewSimulatedCall) => {
      batches.push(1);
      return insertSimulatedCall<InsertedTimerRow>(deps.sql, c, timer, {
        activeAgent: true,
        contactExists: c.contactId !== null,
      });
    },
    (cs) => {
      batches.push(cs.length);
      return insertSimulatedCalls<InsertedTimerRow>(deps.sql, cs, timer);
    },
    { ...STATEMENT_COALESCING, refusedByDatabase },
  ) as SimulatedCallInserts;
});
afterAll(() => ctx.close());

describe("test calls created together", () => {
  test("24 parallel requests, every refusal mixed in: one statement for many, each answered as alone", async () => {
    const seed = await seedOrganization(ctx);
    const other = await seedOrganization(ctx);
    const resting = (await createAgent(ctx.deps, seed.org.id, { name: "Resting", active: false })).id;
    const restricted = await createSecretKey(ctx.deps, seed.org.id, {
      mode: "test",
      scopes: ["*"],
      agentIds: [resting],
    });
    const contactId = await insertContact(ctx.deps, seed.org.id);
    const foreignContact = await insertContact(ctx.deps, other.org.id);
    const before = await writeCounts(ctx.deps.sql);
    batches = [];

    const kinds = [
      "valid",
      "valid with contact",
      "unknown agent",
      "another organization's agent",
      "inactive agent",
      "restricted key",
      "another organization's contact",
      "valid with variables",
    ] as const;
    const answers = await Promise.all(
      Array.from({ length: 24 }, async (_, i) => {
        const kind = kinds[i % kinds.length]!;
        const agentId =
          kind === "unknown agent"
            ? "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"
            : kind === "another organization's agent"
              ? other.agent.id
              : kind === "inactive agent"
                ? resting
                : seed.agent.id;
        const json = {
          agentId,
          to: "+33612345678",
          ...(kind === "valid with contact" ? { contactId } : {}),
          ...(kind === "another organization's contact" ? { contactId: foreignContact } : {}),
          ...(kind === "valid with variables" ? { variables: { language: "fr" } } : {}),
        };
        const res = await ctx.request("/api/v1/calls", {
          method: "POST",
          key: kind === "restricted key" ? restricted.key : seed.testKey,
          json,
        });
        const body = res.status === 201 ? await res.clone().json() : null;
        return { kind, outcome: await outcomeOf(res), body };
      }),
    );
    const tally: Record<string, number> = {};
    for (const a of answers) tally[`${a.kind}: ${a.outcome}`] = (tally[`${a.kind}: ${a.outcome}`] ?? 0) + 1;
    expect(tally).toEqual({
      "valid: 201 ok": 3,
      "valid with contact: 201 ok": 3,
      "unknown agent: 404 not_found": 3,
      "another organization's agent: 404 not_found": 3,
      "inactive agent: 503 agent_unavailable": 3,
      "restricted key: 403 agent_not_allowed": 3,
      "another organization's contact: 404 not_found": 3,
      "valid with variables: 201 ok": 3,
    });
    expect(Math.max(...batches)).toBeGreaterThan(1);
    for (const a of answers.filter((a) => a.body)) {
      expect(a.body).toMatchObject({ status: "initiated", livemode: false, agentId: seed.agent.id });
      if (a.kind === "valid with contact") expect(a.body.contactId).toBe(contactId);
      const [row] = await ctx.deps.sql<
        { language: string }[]
      >`select language from calls where id = ${a.body.id}`;
      // The variables' language, else the agent's (English).
      expect(row!.language).toBe(a.kind === "valid with variables" ? "fr" : "en");
    }
    // Nine calls, each with the one timer of its first step; nothing for the refused requests.
    const after = await writeCounts(ctx.deps.sql);
    expect(after.calls! - before.calls!).toBe(9);
    const ids = answers.filter((a) => a.body).map((a) => a.body.id as string);
    const timers = await ctx.deps.sql<{ n: number }[]>`
      select count(*)::int as n from timers where payload->>'callId' = any(${ids}::text[])
      group by payload->>'callId'`;
    expect(timers.map((t) => t.n)).toEqual(Array(9).fill(1));
  });
});
