/**
 * Cursor list benchmark: page 1 against a page 5,000 items deep, with and without filters, through
 * the real HTTP app on PostgreSQL, plus EXPLAIN (ANALYZE) of the page statement the helper runs.
 *
 *   npm run bench:lists                     100,000 rows per list
 *   BENCH_ROWS=20000 BENCH_REQUESTS=100 npm run bench:lists
 *
 * It creates and drops its own database (TEST_PG_URL, default postgres://postgres@127.0.0.1:5432).
 * Another list joins by adding one entry to LISTS: how to seed it in bulk, its route, its filters.
 */
import type { Sql } from "postgres";
import { callsPage } from "../../src/db/calls.ts";
import { contactsPage } from "../../src/db/contacts.ts";
import { type PageRequest, pageQuery } from "../../src/db/engine/pages.ts";
import { eventsPage } from "../../src/db/events.ts";
import { type IdPrefix, isId } from "../../src/ids.ts";
import { silentLogger } from "../../src/log.ts";
import { createTestContext, seedOrganization } from "../helpers/app.ts";
import { cursorAt } from "../helpers/plans.ts";
import { percentile } from "./lib.ts";

const ROWS = Number(process.env.BENCH_ROWS ?? 100_000);
const DEPTH = Number(process.env.BENCH_DEPTH ?? 5_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 300);
const WARMUP = 50;
const LIMIT = 20;

interface Seeded {
  orgId: string;
  agentId: string;
}

interface ListCase {
  name: string;
  table: string;
  prefix: IdPrefix;
  route: string;
  /** Which key reads the list. */
  mode: "live" | "test";
  /** Inserts `rows` rows for the organization in one statement (generate_series). */
  seed(sql: Sql, s: Seeded, rows: number): Promise<void>;
  /** Query strings to time ("" = no filter) and the list's page statement for each. */
  filters: {
    label: string;
    query: string;
    page(sql: Sql, s: Seeded, q: { limit: number; starting_after?: string }): PageRequest<never>;
  }[];
}

/**
 * Rows get valid ids (`<prefix>_` + 26 Crockford characters, time part from created_at) and
 * timestamps shared by 3 consecutive rows, so the order relies on the id tiebreak as in real life.
 */
const BASE = "timestamptz '2026-01-01T00:00:00Z'";
const createdAt = `${BASE} + ((i / 3) * interval '1 millisecond')`;
const idOf = (prefix: string) =>
  `'${prefix}_' || bench_crockford((extract(epoch from ${createdAt}) * 1000)::bigint, 10) || bench_crockford(i::bigint, 16)`;

const LISTS: ListCase[] = [
  {
    name: "calls",
    table: "calls",
    prefix: "call",
    route: "/api/v1/calls",
    mode: "test",
    seed: async (sql, s, rows) => {
      // Simulated calls in every state, nine in ten completed, one in ten still ringing.
      await sql.unsafe(
        `insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at,
                            updated_at)
         select ${idOf("call")}, $1, false, case when i % 10 = 0 then 'ringing' else 'completed' end, $3,
                '+3360000000' || (i % 10), 'outbound', ${createdAt}, ${createdAt}
         from generate_series(1, $2::int) i`,
        [s.orgId, rows, s.agentId],
      );
    },
    filters: [
      { label: "no filter", query: "", page: (sql, s, q) => callsPage(sql, testScope(s), q) },
      {
        label: "status=ringing",
        query: "status=ringing",
        page: (sql, s, q) => callsPage(sql, testScope(s), { ...q, status: "ringing" }),
      },
    ],
  },
  {
    name: "contacts",
    table: "contacts",
    prefix: "ct",
    route: "/api/v1/contacts",
    mode: "test",
    seed: async (sql, s, rows) => {
      await sql.unsafe(
        `insert into contacts (id, organization_id, phone, name, email, metadata, created_at, updated_at)
         select ${idOf("ct")}, $1, '+3360000000' || (i % 10), 'Contact ' || i, 'c' || i || '@example.com',
                jsonb_build_object('n', i), ${createdAt}, ${createdAt}
         from generate_series(1, $2::int) i`,
        [s.orgId, rows],
      );
    },
    filters: [
      { label: "no filter", query: "", page: (sql, s, q) => contactsPage(sql, s.orgId, q) },
      {
        label: "phone=+33600000003",
        query: "phone=%2B33600000003",
        page: (sql, s, q) => contactsPage(sql, s.orgId, { ...q, phone: "+33600000003" }),
      },
    ],
  },
  {
    name: "events",
    table: "events",
    prefix: "evt",
    route: "/api/v1/events",
    mode: "test",
    seed: async (sql, s, rows) => {
      // One in five is live; eleven types in turn, so a type filter keeps about 7 % of the test events.
      await sql.unsafe(
        `insert into events (id, organization_id, type, livemode, data, created_at)
         select ${idOf("evt")}, $1,
                (array['call.started','call.ended','call.transcript_ready','call.analysis_ready','campaign.started',
                       'campaign.completed','campaign.cancelled','contact.created','contact.updated',
                       'contact.deleted','knowledge.document_ready'])[1 + i % 11],
                i % 5 = 0, jsonb_build_object('id', 'ct_' || i), ${createdAt}
         from generate_series(1, $2::int) i`,
        [s.orgId, rows],
      );
    },
    filters: [
      { label: "no filter", query: "", page: (sql, s, q) => eventsPage(sql, testScope(s), q) },
      {
        label: "type=contact.created",
        query: "type=contact.created",
        page: (sql, s, q) => eventsPage(sql, testScope(s), { ...q, type: "contact.created" }),
      },
    ],
  },
];

function testScope(s: Seeded) {
  return { organizationId: s.orgId, livemode: false, agentIds: null };
}

const fmt = (ms: number) => `${ms.toFixed(2)} ms`;

async function main() {
  const ctx = await createTestContext({ log: silentLogger });
  const { sql } = ctx.deps;
  try {
    const seed = await seedOrganization(ctx);
    const s: Seeded = { orgId: seed.org.id, agentId: seed.agent.id };
    await sql.unsafe(`
      create function bench_crockford(n bigint, len int) returns text language sql immutable as $$
        select string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((n >> (5 * (len - 1 - p))) & 31)::int + 1, 1), ''
                          order by p)
        from generate_series(0, len - 1) p
      $$`);
    console.log(
      `database: ${ctx.db.kind}; ${ROWS.toLocaleString("en")} rows per list; page ${LIMIT}; depth ${DEPTH}`,
    );

    for (const list of LISTS) {
      const t0 = performance.now();
      await list.seed(sql, s, ROWS);
      await sql.unsafe(`analyze ${list.table}`);
      console.log(`\nseeded ${list.name} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      const key = list.mode === "live" ? seed.liveKey : seed.testKey;

      for (const f of list.filters) {
        const deep = {
          id: await cursorAt((limit, after) => f.page(sql, s, { limit, starting_after: after }), DEPTH),
        };
        if (!isId(deep.id, list.prefix)) throw new Error(`${list.name}: ${deep.id} is not an id`);
        const sep = f.query ? "&" : "";
        const page1 = `${list.route}?${f.query}${sep}limit=${LIMIT}`;
        const deepPage = `${page1}&starting_after=${deep.id}`;

        const times = { page1: [] as number[], deep: [] as number[] };
        for (let i = 0; i < WARMUP + REQUESTS; i++) {
          // Alternate so that both suffer the same background noise.
          for (const [which, path] of [
            ["page1", page1],
            ["deep", deepPage],
          ] as const) {
            const start = performance.now();
            const res = await ctx.request(path, { key });
            const body = (await res.json()) as { data: unknown[] };
            const ms = performance.now() - start;
            if (res.status !== 200 || body.data.length !== LIMIT) {
              throw new Error(`${path}: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
            }
            if (i >= WARMUP) times[which].push(ms);
          }
        }
        const p1 = times.page1.sort((a, b) => a - b);
        const dp = times.deep.sort((a, b) => a - b);
        const ratio = percentile(dp, 50) / percentile(p1, 50);
        console.log(
          `${list.name} [${f.label}]  page 1: p50 ${fmt(percentile(p1, 50))} p99 ${fmt(percentile(p1, 99))}` +
            `  |  depth ${DEPTH}: p50 ${fmt(percentile(dp, 50))} p99 ${fmt(percentile(dp, 99))}` +
            `  |  deep/page1 p50 ×${ratio.toFixed(2)}  (${REQUESTS} requests each, HTTP in-process)`,
        );

        for (const [label, startingAfter] of [
          ["page 1", undefined],
          [`depth ${DEPTH}`, deep.id],
        ] as const) {
          const statement = pageQuery(
            f.page(sql, s, { limit: LIMIT, ...(startingAfter ? { starting_after: startingAfter } : {}) }),
          );
          const plan = await sql<
            { "QUERY PLAN": string }[]
          >`explain (analyze, buffers, costs off) ${statement}`;
          const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
          const verdict = /Seq Scan|Sort Method|Sort Key/.test(text) ? "NOT INDEX-ONLY ORDER" : "index order";
          console.log(`  EXPLAIN ${label} [${f.label}] (${verdict}):\n${indent(text)}`);
        }
      }
    }
  } finally {
    await ctx.close();
  }
}

const indent = (text: string) =>
  text
    .split("\n")
    .map((l) => `    ${l}`)
    .join("\n");

await main();
