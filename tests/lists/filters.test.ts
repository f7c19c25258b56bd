import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Page } from "../../src/db/engine/pages.ts";
import { createAgent } from "../../src/services/agents.ts";
import { listCalls } from "../../src/services/calls.ts";
import { listCampaigns } from "../../src/services/campaigns.ts";
import { listEvents } from "../../src/services/events.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";

/**
 * The lists whose filters and restricted keys pick among index ranges (db/<table>.ts: callsPage,
 * eventsPage, campaignsPage) hold exactly the rows of their scope, newest first, page after page, for
 * every combination of a key's agents and the filters; a cursor outside that scope is
 * `invalid_cursor`. The oracle is the rows filtered and sorted here. Timestamps repeat often, so the
 * order relies on the id tiebreak.
 */

let ctx: TestContext;
let orgId: string;
/** Three agents of the organization; the third is in no key's agents below. */
let agents: [string, string, string];
const CAMPAIGNS = ["cmp_01JDF000000000000000000001", "cmp_01JDF000000000000000000002"];
const BASE = Date.parse("2026-11-20T10:00:00.000Z");
/** Pages of a few items, so that each walk crosses pages (the embedded database runs these slowly). */
const LIMIT = 8;

interface Row {
  id: string;
  agent: string | null;
  status: string;
  campaign: string | null;
  createdAt: number;
}

/** `count` rows, attributes drawn from a fixed sequence (reproducible), ids in the id format. */
function rows(count: number, prefix: string, pick: (i: number) => Omit<Row, "id" | "createdAt">): Row[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `${prefix}_01JDF${String(i).padStart(21, "0")}`,
    // Every three rows share a timestamp; the order between them is the id's.
    createdAt: BASE + Math.floor(((i * 7) % count) / 3) * 1000,
    ...pick(i),
  }));
}

/** Every page of a list, `limit` at a time, as a client walks it. */
async function walk(read: (startingAfter: string | undefined) => Promise<Page<{ id: string }>>) {
  const ids: string[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await read(after);
    ids.push(...page.data.map((r) => r.id));
    if (!page.has_more) return ids;
    after = page.data.at(-1)!.id;
  }
}

/** The code of the error `read` fails with, or "none". */
const refusal = (read: Promise<unknown>) =>
  read.then(
    () => "none",
    (err: { code?: string }) => err.code,
  );

const newestFirst = (a: Row, b: Row) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1);

/** The scopes of keys: unrestricted, one agent, two, none. */
const KEY_AGENTS = (): (string[] | null)[] => [null, [agents[0]], [agents[0], agents[1]], []];

beforeAll(async () => {
  ctx = await createTestContext();
  const seed = await seedOrganization(ctx);
  orgId = seed.org.id;
  agents = [
    seed.agent.id,
    (await createAgent(ctx.deps, orgId, { name: "Sales", active: true })).id,
    (await createAgent(ctx.deps, orgId, { name: "Billing", active: true })).id,
  ];
});
afterAll(() => ctx.close());

describe("calls", () => {
  const STATUSES = ["completed", "failed", "ringing"];
  let all: Row[];
  beforeAll(async () => {
    all = rows(30, "call", (i) => ({
      agent: agents[i % 3]!,
      status: STATUSES[Math.floor(i / 3) % 3]!,
      campaign: i % 4 === 0 ? null : CAMPAIGNS[i % 2]!,
    }));
    const sql = ctx.deps.sql;
    for (const r of all) {
      await sql`
        insert into calls (id, organization_id, livemode, status, agent_id, campaign_id, direction, created_at,
          updated_at)
        values (${r.id}, ${orgId}, false, ${r.status}, ${r.agent}, ${r.campaign}, 'web', ${new Date(r.createdAt)},
          ${new Date(r.createdAt)})`;
    }
  });

  test("keys' agents with the filters: exactly their calls, in order", async () => {
    const filters = [undefined, "failed"].flatMap((status) =>
      [undefined, agents[0], agents[2]].flatMap((agentId) =>
        [undefined, CAMPAIGNS[0]!].map((campaignId) => ({ status, agentId, campaignId })),
      ),
    );
    const cases = [
      // Every combination of filters, unrestricted and for a key of two agents (the third outside it).
      ...filters.map((f) => ({ agentIds: null, ...f })),
      ...filters.map((f) => ({ agentIds: [agents[0], agents[1]], ...f })),
      { agentIds: [agents[0]] },
      { agentIds: [agents[0]], status: "failed" },
      { agentIds: [agents[0]], agentId: agents[2] },
      { agentIds: [] },
    ];
    for (const { agentIds, status, agentId, campaignId } of cases as {
      agentIds: string[] | null;
      status?: string;
      agentId?: string;
      campaignId?: string;
    }[]) {
      const label = JSON.stringify({ agentIds, status, agentId, campaignId });
      const expected = all
        .filter(
          (r) =>
            (agentIds === null || agentIds.includes(r.agent!)) &&
            (status === undefined || r.status === status) &&
            (agentId === undefined || r.agent === agentId) &&
            (campaignId === undefined || r.campaign === campaignId),
        )
        .sort(newestFirst);
      const auth = { organizationId: orgId, livemode: false, agentIds };
      const q = { status: status as "failed" | undefined, agentId, campaignId };
      const ids = await walk((after) =>
        listCalls(ctx.deps, auth, { limit: LIMIT, starting_after: after, ...q }),
      );
      expect(ids, label).toEqual(expected.map((r) => r.id));
      const outside = all.find((r) => !expected.includes(r));
      if (outside) {
        expect(
          await refusal(listCalls(ctx.deps, auth, { limit: LIMIT, starting_after: outside.id, ...q })),
          label,
        ).toBe("invalid_cursor");
      }
    }
  });
});

describe("events", () => {
  const TYPES = ["call.started", "call.ended", "contact.created"];
  let all: Row[];
  beforeAll(async () => {
    all = rows(30, "evt", (i) => ({
      agent: i % 5 === 0 ? null : agents[i % 3]!,
      status: TYPES[Math.floor(i / 2) % 3]!,
      campaign: null,
    }));
    const sql = ctx.deps.sql;
    for (const r of all) {
      await sql`
        insert into events (id, organization_id, agent_id, type, livemode, data, created_at)
        values (${r.id}, ${orgId}, ${r.agent}, ${r.status}, false, '{}', ${new Date(r.createdAt)})`;
    }
  });

  test("every key's agents with and without a type: exactly their events, in order", async () => {
    for (const agentIds of KEY_AGENTS()) {
      for (const type of [undefined, "call.ended" as const]) {
        const label = JSON.stringify({ agentIds, type });
        const expected = all
          .filter(
            (r) =>
              (agentIds === null || (r.agent !== null && agentIds.includes(r.agent))) &&
              (type === undefined || r.status === type),
          )
          .sort(newestFirst);
        const scope = { organizationId: orgId, livemode: false, agentIds };
        const ids = await walk((after) =>
          listEvents(ctx.deps, scope, { limit: LIMIT, starting_after: after, type }),
        );
        expect(ids, label).toEqual(expected.map((r) => r.id));
        const outside = all.find((r) => !expected.includes(r));
        if (outside) {
          expect(
            await refusal(listEvents(ctx.deps, scope, { limit: LIMIT, starting_after: outside.id, type })),
            label,
          ).toBe("invalid_cursor");
        }
      }
    }
  });
});

describe("campaigns", () => {
  const STATUSES = ["running", "completed", "cancelled"];
  let all: Row[];
  beforeAll(async () => {
    all = rows(30, "cmp", (i) => ({
      agent: agents[i % 3]!,
      status: STATUSES[Math.floor(i / 2) % 3]!,
      campaign: null,
    }));
    const sql = ctx.deps.sql;
    for (const r of all) {
      const [pending, completed, cancelled] =
        r.status === "running" ? [1, 0, 0] : r.status === "completed" ? [0, 1, 0] : [0, 0, 1];
      await sql`
        insert into campaigns (id, organization_id, livemode, name, agent_id, status, concurrency, max_attempts,
          total, pending, in_progress, completed, succeeded, cancelled, created_at, updated_at)
        values (${r.id}, ${orgId}, false, 'Campaign', ${r.agent}, ${r.status}, 1, 1, 1, ${pending}, 0,
          ${completed}, ${completed}, ${cancelled}, ${new Date(r.createdAt)}, ${new Date(r.createdAt)})`;
    }
  });

  test("every key's agents with and without a status: exactly their campaigns, in order", async () => {
    for (const agentIds of KEY_AGENTS()) {
      for (const status of [undefined, "completed"]) {
        const label = JSON.stringify({ agentIds, status });
        const expected = all
          .filter(
            (r) =>
              (agentIds === null || agentIds.includes(r.agent!)) &&
              (status === undefined || r.status === status),
          )
          .sort(newestFirst);
        const auth = { organizationId: orgId, livemode: false, agentIds };
        const ids = await walk((after) =>
          listCampaigns(ctx.deps, auth, { limit: LIMIT, starting_after: after, status }),
        );
        expect(ids, label).toEqual(expected.map((r) => r.id));
        const outside = all.find((r) => !expected.includes(r));
        if (outside) {
          expect(
            await refusal(
              listCampaigns(ctx.deps, auth, { limit: LIMIT, starting_after: outside.id, status }),
            ),
            label,
          ).toBe("invalid_cursor");
        }
      }
    }
  });
});
