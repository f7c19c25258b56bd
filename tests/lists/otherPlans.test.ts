import { afterAll, beforeAll, describe, test } from "bun:test";
import { blockedNumbersPage } from "../../src/db/blockedNumbers.ts";
import { campaignsPage } from "../../src/db/campaigns.ts";
import { contactsPage } from "../../src/db/contacts.ts";
import { documentsPage } from "../../src/db/documents.ts";
import { deliveriesPage } from "../../src/db/webhookDeliveries.ts";
import { rowId } from "../../src/ids.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createKnowledgeBase } from "../../src/services/knowledgeBases.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { cursorAt, expectListWalks, type Filling, grow, HISTORIES, type ListCase } from "../helpers/plans.ts";

/**
 * The cursor lists besides calls and events (tests/lists/plans.test.ts, tests/db/hotPlans.test.ts):
 * campaigns, contacts, documents, an endpoint's deliveries, blocked numbers. With each filter, each
 * page walks an index of its own and reads about as many rows as it returns, whatever the statistics
 * (never analyzed; analyzed while it held 10 rows, all within the filters, then grown a thousandfold;
 * one large organization among many small ones), first page and after a deep cursor, generic and
 * custom plans. The statements are the lists' own (db/<table>.ts). As for calls, the rows outside the
 * filters are the newest, so a filter checked row by row would read thousands of them first.
 */

let ctx: TestContext;
type Seed = Awaited<ReturnType<typeof seedOrganization>>;
let seed: Seed;
let other: { id: string };
let few: { id: string };
let small: Seed[];
const LIMIT = 20;
/** The key of the delivery ids shown (any key does: the list reads the number the id enciphers). */
const ROW_ID_KEY = crypto.getRandomValues(new Uint8Array(32));
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await createAgent(ctx.deps, seed.org.id, { name: "Sales", active: true });
  few = await createAgent(ctx.deps, seed.org.id, { name: "Billing", active: true });
  small = await Promise.all(Array.from({ length: 20 }, () => seedOrganization(ctx)));
});
afterAll(() => ctx.close());

/** An id of `prefix` for row `i` of a batch: `tag` (a few id characters) then the number. */
const idOf = (prefix: string, tag: string) => `'${prefix}_${tag}' || lpad(i::text, ${26 - tag.length}, '0')`;
/** One per millisecond backwards from `ago` seconds ago. */
const at = (ago: number) => `now() - ${ago} * interval '1 second' - i * interval '1 millisecond'`;

/**
 * Each list's cursor `depth` items deep (1,000 unless said; null: none), as the API shows it (`shown`:
 * serial ids).
 */
function withCursors(
  lists: (Omit<ListCase, "deep"> & {
    depth?: number | null;
    shown?: (row: { id: string; created_at: Date }) => string;
  })[],
): Promise<ListCase[]> {
  return Promise.all(
    lists.map(async ({ depth = 1_000, shown, ...l }) => ({
      ...l,
      deep:
        depth === null
          ? null
          : await cursorAt((limit, after) => l.page(ctx.deps.sql, limit, after), depth, shown),
    })),
  );
}

async function check(table: string, fill: Filling, lists: () => Parameters<typeof withCursors>[0]) {
  for (const history of HISTORIES) {
    await grow(ctx.deps.sql, table, history, fill);
    await expectListWalks(ctx, table, await withCursors(lists()), LIMIT);
  }
}

describe("campaigns", () => {
  const insert = (c: {
    org: string;
    agent: string;
    count: number;
    tag: string;
    ago: number;
    status: string;
  }) =>
    ctx.deps.sql.unsafe(
      `insert into campaigns (id, organization_id, livemode, name, agent_id, status, concurrency, max_attempts,
         total, pending, in_progress, completed, succeeded, created_at, updated_at)
       select ${idOf("cmp", c.tag)}, $1, false, 'Campaign', $2, $3, 1, 1, 1,
         case when $3 = 'running' then 1 else 0 end, 0, case when $3 = 'running' then 0 else 1 end,
         case when $3 = 'running' then 0 else 1 end, ${at(c.ago)}, ${at(c.ago)}
       from generate_series(1, $4::int) i`,
      [c.org, c.agent, c.status, c.count],
    );
  test("status and keys restricted to some agents, in every history", async () => {
    const org = seed.org.id;
    const agent = seed.agent.id;
    const scope = (agentIds: string[] | null) => ({ organizationId: org, livemode: false, agentIds });
    await check(
      "campaigns",
      {
        few: () => insert({ org, agent, count: 10, tag: "A", ago: 7200, status: "completed" }),
        many: async () => {
          await insert({ org, agent: other.id, count: 8_000, tag: "B", ago: 0, status: "running" });
          await insert({ org, agent, count: 2_000, tag: "C", ago: 3600, status: "completed" });
          await insert({ org, agent: few.id, count: 50, tag: "D", ago: 5400, status: "completed" });
        },
        elsewhere: () =>
          Promise.all(
            small.map((s, i) =>
              insert({
                org: s.org.id,
                agent: s.agent.id,
                count: 3,
                tag: `F${CROCKFORD[i]}`,
                ago: 0,
                status: "running",
              }),
            ),
          ),
      },
      () => [
        {
          label: "all",
          page: (sql, limit, after) => campaignsPage(sql, scope(null), { limit, starting_after: after }),
        },
        {
          label: "status",
          page: (sql, limit, after) =>
            campaignsPage(sql, scope(null), { limit, starting_after: after, status: "completed" }),
        },
        {
          label: "key restricted to one agent",
          page: (sql, limit, after) => campaignsPage(sql, scope([agent]), { limit, starting_after: after }),
        },
        {
          label: "key restricted to two agents, status",
          page: (sql, limit, after) =>
            campaignsPage(sql, scope([agent, few.id]), { limit, starting_after: after, status: "completed" }),
        },
      ],
    );
  });
});

describe("contacts", () => {
  const PHONE = "+33600000001";
  const EMAIL = "Ana@Example.com";
  const insert = (c: {
    org: string;
    count: number;
    tag: string;
    ago: number;
    phone: string;
    email: string;
  }) =>
    ctx.deps.sql.unsafe(
      `insert into contacts (id, organization_id, phone, name, email, metadata, created_at, updated_at)
       select ${idOf("ct", c.tag)}, $1, $2, 'Contact', $3, '{}', ${at(c.ago)}, now()
       from generate_series(1, $4::int) i`,
      [c.org, c.phone, c.email, c.count],
    );
  test("phone, email and both, in every history", async () => {
    const org = seed.org.id;
    const phone = { phone: PHONE, email: EMAIL };
    await check(
      "contacts",
      {
        few: () => insert({ org, count: 10, tag: "A", ago: 7200, ...phone }),
        many: async () => {
          await insert({
            org,
            count: 8_000,
            tag: "B",
            ago: 0,
            phone: "+33600000002",
            email: "bob@example.com",
          });
          await insert({ org, count: 2_000, tag: "C", ago: 3600, ...phone });
        },
        elsewhere: () =>
          Promise.all(
            small.map((s, i) =>
              insert({ org: s.org.id, count: 3, tag: `F${CROCKFORD[i]}`, ago: 0, ...phone }),
            ),
          ),
      },
      () => [
        {
          label: "all",
          page: (sql, limit, after) => contactsPage(sql, org, { limit, starting_after: after }),
        },
        {
          label: "phone",
          page: (sql, limit, after) => contactsPage(sql, org, { limit, starting_after: after, phone: PHONE }),
        },
        {
          label: "email, in another case",
          page: (sql, limit, after) =>
            contactsPage(sql, org, { limit, starting_after: after, email: EMAIL.toUpperCase() }),
        },
        {
          label: "phone and email",
          page: (sql, limit, after) =>
            contactsPage(sql, org, { limit, starting_after: after, phone: PHONE, email: EMAIL }),
        },
      ],
    );
  });
});

describe("documents", () => {
  let otherKb: { id: string };
  beforeAll(async () => {
    otherKb = await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Pricing" });
  });
  const insert = (d: { org: string; kb: string; count: number; tag: string; ago: number }) =>
    ctx.deps.sql.unsafe(
      `insert into documents (id, organization_id, knowledge_base_id, title, chunk_count, created_at)
       select ${idOf("doc", d.tag)}, $1, $2, 'Document', 1, ${at(d.ago)}
       from generate_series(1, $3::int) i`,
      [d.org, d.kb, d.count],
    );
  test("a knowledge base's documents, in every history", async () => {
    const org = seed.org.id;
    const kb = seed.kb.id;
    await check(
      "documents",
      {
        few: () => insert({ org, kb, count: 10, tag: "A", ago: 7200 }),
        many: async () => {
          await insert({ org, kb: otherKb.id, count: 8_000, tag: "B", ago: 0 });
          await insert({ org, kb, count: 2_000, tag: "C", ago: 3600 });
        },
        elsewhere: () =>
          Promise.all(
            small.map((s, i) =>
              insert({ org: s.org.id, kb: s.kb.id, count: 3, tag: `F${CROCKFORD[i]}`, ago: 0 }),
            ),
          ),
      },
      () => [
        {
          label: "the knowledge base",
          page: (sql, limit, after) =>
            documentsPage(sql, { knowledgeBaseId: kb, livemode: true }, { limit, starting_after: after }),
        },
      ],
    );
  });
});

describe("an endpoint's deliveries", () => {
  const EVENT = "evt_01JDQ000000000000000000000";
  const ENDPOINT = "we_01JDQ000000000000000000001";
  beforeAll(async () => {
    // Deliveries of one event suffice: the log reads by endpoint. No endpoint exists, so none is made.
    await ctx.deps.sql`
      insert into events (id, organization_id, type, livemode, data, created_at)
      values (${EVENT}, ${seed.org.id}, 'contact.created', true, '{}', now())`;
  });
  const insert = (d: { endpoint: string; count: number; ago: number }) =>
    ctx.deps.sql.unsafe(
      `insert into webhook_deliveries (event_id, endpoint_id, created_at)
       select $1, $2, ${at(d.ago)} from generate_series(1, $3::int) i`,
      [EVENT, d.endpoint, d.count],
    );
  test("the log of one endpoint, in every history", async () => {
    await check(
      "webhook_deliveries",
      {
        few: () => insert({ endpoint: ENDPOINT, count: 10, ago: 7200 }),
        many: async () => {
          await insert({ endpoint: "we_01JDQ000000000000000000002", count: 8_000, ago: 0 });
          await insert({ endpoint: ENDPOINT, count: 2_000, ago: 3600 });
        },
        elsewhere: () =>
          Promise.all(
            small.map((_, i) =>
              insert({ endpoint: `we_01JDQ00000000000000000010${CROCKFORD[i]}`, count: 3, ago: 0 }),
            ),
          ),
      },
      () => [
        {
          label: "the endpoint",
          page: (sql, limit, after) =>
            deliveriesPage(sql, ENDPOINT, { limit, starting_after: after }, ROW_ID_KEY),
          shown: (row) => rowId(ROW_ID_KEY, "whd", row.id, row.created_at),
        },
      ],
    );
  });
});

describe("blocked numbers", () => {
  const TARGET = "+33700000000";
  /** `count` numbers of `prefix` (distinct within the organization and mode). */
  const insert = (b: { org: string; count: number; tag: string; ago: number; prefix: string }) =>
    ctx.deps.sql.unsafe(
      `insert into blocked_numbers (id, organization_id, livemode, phone, created_at)
       select ${idOf("bn", b.tag)}, $1, true, $2 || lpad(i::text, 8, '0'), ${at(b.ago)}
       from generate_series(1, $3::int) i`,
      [b.org, b.prefix, b.count],
    );
  test("all, and one number, in every history", async () => {
    const org = seed.org.id;
    const scope = { organizationId: org, livemode: true };
    // The number looked for is the oldest entry, behind every other.
    const target = () =>
      ctx.deps.sql`
        insert into blocked_numbers (id, organization_id, livemode, phone, created_at)
        values ('bn_01JDQ000000000000000000000', ${org}, true, ${TARGET}, now() - interval '1 day')
        on conflict do nothing`;
    await check(
      "blocked_numbers",
      {
        few: async () => {
          await insert({ org, count: 9, tag: "A", ago: 7200, prefix: "+3350" });
          await target();
        },
        many: async () => {
          await insert({ org, count: 10_000, tag: "B", ago: 0, prefix: "+3360" });
          await target();
        },
        elsewhere: () =>
          Promise.all(
            small.map((s, i) =>
              insert({ org: s.org.id, count: 3, tag: `F${CROCKFORD[i]}`, ago: 0, prefix: "+3360" }),
            ),
          ),
      },
      () => [
        {
          label: "all",
          page: (sql, limit, after) => blockedNumbersPage(sql, scope, { limit, starting_after: after }),
        },
        {
          label: "one number",
          page: (sql, limit, after) =>
            blockedNumbersPage(sql, scope, { limit, starting_after: after, phone: TARGET }),
          depth: null,
          rows: 1,
        },
      ],
    );
  });
});
