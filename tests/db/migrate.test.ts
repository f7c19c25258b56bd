import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { migrate } from "../../src/db/engine/migrate.ts";
import { migrations } from "../../src/db/engine/migrations.ts";
import { createTestDatabase, PG_ADMIN_URL } from "../helpers/db.ts";
import { spawnService } from "./serviceProcess.ts";

// The advisory lock matters on PostgreSQL, where several processes share one database; the
// embedded database admits one process per DATA_DIR (tests/db/embedded.test.ts).
const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
const created: string[] = [];

async function freshDatabase(): Promise<string> {
  const name = `vs_test_migrate_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin.unsafe(`create database ${name}`);
  created.push(name);
  return PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
}

beforeAll(async () => {
  await admin`select 1`;
});
afterAll(async () => {
  for (const name of created) await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end();
});

describe("migrate: concurrent runners on one fresh PostgreSQL database", () => {
  test("two pools migrating at once both succeed and each migration is applied once", async () => {
    const url = await freshDatabase();
    const a = postgres(url, { max: 3, onnotice: () => {} });
    const b = postgres(url, { max: 3, onnotice: () => {} });
    // Slow migrations so that the two runs overlap: without the lock both would create the table.
    const slow = [
      { name: "0001_a", sql: "select pg_sleep(0.2); create table a (id int)" },
      { name: "0002_b", sql: "select pg_sleep(0.2); create table b (id int)" },
    ];
    try {
      const [first, second] = await Promise.all([migrate(a, undefined, slow), migrate(b, undefined, slow)]);
      expect([...first, ...second].sort()).toEqual(["0001_a", "0002_b"]);
      expect(first.length === 0 || second.length === 0).toBe(true);
      const rows = await a<{ name: string }[]>`select name from schema_migrations order by name`;
      expect(rows.map((r) => r.name)).toEqual(["0001_a", "0002_b"]);
    } finally {
      await a.end();
      await b.end();
    }
  });

  test("two `migrate` processes started together apply the real migrations once", async () => {
    const url = await freshDatabase();
    const runs = [0, 1].map(() => spawnService(["migrate"], { env: { DATABASE_URL: url } }));
    const codes = await Promise.all(runs.map((r) => r.exited));
    expect(codes).toEqual([0, 0]);
    const applied = runs.flatMap(
      (r) => JSON.parse(r.output().trim().split("\n").at(-1)!).applied as string[],
    );
    expect(applied.sort()).toEqual(migrations.map((m) => m.name).sort());

    const db = postgres(url, { max: 1, onnotice: () => {} });
    const rows = await db<{ name: string }[]>`select name from schema_migrations`;
    await db.end();
    expect(rows.map((r) => r.name).sort()).toEqual(migrations.map((m) => m.name).sort());
  });
});

describe("upgrading a database that has webhook endpoints and events (0020_webhook_modes)", () => {
  test("existing endpoints become live and enabled; events get the agent of their object", async () => {
    const url = await freshDatabase();
    const db = postgres(url, { max: 2, onnotice: () => {} });
    try {
      const upTo = migrations.findIndex((m) => m.name === "0020_webhook_modes");
      expect(upTo).toBeGreaterThan(0);
      await migrate(db, undefined, migrations.slice(0, upTo));
      const now = new Date();
      await db`insert into organizations (id, name, created_at) values ('org_1', 'Acme', ${now})`;
      await db`insert into agents (id, organization_id, name, created_at) values ('agt_1', 'org_1', 'A', ${now})`;
      await db`
        insert into calls (id, organization_id, livemode, status, agent_id, direction, created_at)
        values ('call_1', 'org_1', false, 'completed', 'agt_1', 'web', ${now})`;
      await db`
        insert into webhook_endpoints (id, organization_id, url, events, secret, created_at)
        values ('we_1', 'org_1', 'https://hooks.example.com/h', null, 'whsec_x', ${now})`;
      for (const [id, type, data] of [
        ["evt_1", "call.ended", { id: "call_1", agentId: "agt_1" }],
        ["evt_2", "call.transcript_ready", { callId: "call_1", segments: [] }],
        ["evt_3", "campaign.started", { id: "cmp_1", agentId: "agt_1" }],
        ["evt_4", "contact.created", { id: "ct_1" }],
      ] as const) {
        await db`
          insert into events (id, organization_id, type, livemode, data, created_at)
          values (${id}, 'org_1', ${type}, false, ${db.json(data as never)}, ${now})`;
      }
      await migrate(db);
      expect([...(await db`select livemode, enabled from webhook_endpoints`)]).toEqual([
        { livemode: true, enabled: true },
      ]);
      expect([...(await db`select id, agent_id from events order by id`)]).toEqual([
        { id: "evt_1", agent_id: "agt_1" },
        { id: "evt_2", agent_id: "agt_1" },
        { id: "evt_3", agent_id: "agt_1" },
        { id: "evt_4", agent_id: null },
      ]);
    } finally {
      await db.end();
    }
  });
});

describe("upgrading a database that has knowledge-base chunks (0031_cjk_search)", () => {
  test("chunks holding Chinese, Japanese or Korean text are indexed again in pairs; the others are left alone", async () => {
    const url = await freshDatabase();
    const db = postgres(url, { max: 2, onnotice: () => {} });
    try {
      const upTo = migrations.findIndex((m) => m.name === "0031_cjk_search");
      expect(upTo).toBeGreaterThan(0);
      await migrate(db, undefined, migrations.slice(0, upTo));
      const now = new Date();
      await db`insert into organizations (id, name, created_at) values ('org_1', 'Acme', ${now})`;
      await db`insert into knowledge_bases (id, organization_id, name, created_at) values ('kb_1', 'org_1', 'K', ${now})`;
      await db`
        insert into documents (id, organization_id, knowledge_base_id, title, chunk_count, created_at)
        values ('doc_1', 'org_1', 'kb_1', 'T', 3, ${now})`;
      // Indexed as they were before: a clause without spaces is one word.
      await db`
        insert into document_chunks (document_id, position, content, separator, search_vector)
        select 'doc_1', p, content, '', to_tsvector('simple', content)
        from unnest(${["说明退货政策。", "返品は30日以内です。", "Plain words only."]}::text[])
          with ordinality as c(content, p)`;
      const matches = async (query: string) => {
        const rows = await db<{ position: number }[]>`
          select position from document_chunks where search_vector @@ ${query}::tsquery order by position`;
        return rows.map((r) => Number(r.position));
      };
      expect(await matches("退货")).toEqual([]);
      const [plainBefore] = await db`select search_vector::text as v from document_chunks where position = 3`;

      await migrate(db);
      expect(await matches("退货")).toEqual([1]);
      expect(await matches("返品")).toEqual([2]);
      expect(await matches("words")).toEqual([3]);
      const [plainAfter] = await db`select search_vector::text as v from document_chunks where position = 3`;
      expect(plainAfter).toEqual(plainBefore!);
    } finally {
      await db.end();
    }
  });
});

describe("upgrading a database that has phone numbers (0037_phone_numbers_in_one_spelling)", () => {
  test("stored numbers take their one spelling; do-not-call entries that become one are merged", async () => {
    const url = await freshDatabase();
    const db = postgres(url, { max: 2, onnotice: () => {} });
    try {
      const upTo = migrations.findIndex((m) => m.name === "0037_phone_numbers_in_one_spelling");
      expect(upTo).toBeGreaterThan(0);
      await migrate(db, undefined, migrations.slice(0, upTo));
      const t = (s: number) => new Date(Date.UTC(2026, 10, 1, 0, 0, s));
      await db`insert into organizations (id, name, created_at) values ('org_1', 'Acme', ${t(0)})`;
      await db`update organizations set caller_number = '+330180000000' where id = 'org_1'`;
      await db`
        insert into blocked_numbers (id, organization_id, livemode, phone, created_at) values
          ('bn_1', 'org_1', true, '+330612345678', ${t(1)}),
          ('bn_2', 'org_1', true, '+33612345679', ${t(2)}),
          ('bn_3', 'org_1', true, '+330612345679', ${t(3)}),
          ('bn_4', 'org_1', false, '+330612345678', ${t(4)}),
          ('bn_5', 'org_1', true, '+4900301234567', ${t(5)}),
          ('bn_6', 'org_1', true, '+15555550123', ${t(6)})`;
      await db`
        insert into contacts (id, organization_id, phone, created_at, updated_at)
        values ('ct_1', 'org_1', '+330612345670', ${t(7)}, ${t(7)}), ('ct_2', 'org_1', '+33612345671', ${t(8)}, ${t(8)})`;

      await migrate(db);
      const entries = await db<{ id: string; livemode: boolean; phone: string }[]>`
        select id, livemode, phone from blocked_numbers order by id`;
      expect([...entries]).toEqual([
        { id: "bn_1", livemode: true, phone: "+33612345678" },
        // bn_3 was bn_2's number written another way: bn_2, already in that spelling, stays.
        { id: "bn_2", livemode: true, phone: "+33612345679" },
        { id: "bn_4", livemode: false, phone: "+33612345678" },
        // Two national prefixes: the one spelling of the one spelling is itself.
        { id: "bn_5", livemode: true, phone: "+49301234567" },
        { id: "bn_6", livemode: true, phone: "+15555550123" },
      ]);
      const contacts = await db<{ id: string; phone: string }[]>`select id, phone from contacts order by id`;
      expect([...contacts]).toEqual([
        { id: "ct_1", phone: "+33612345670" },
        { id: "ct_2", phone: "+33612345671" },
      ]);
      const [org] = await db<{ caller_number: string }[]>`select caller_number from organizations`;
      expect(org!.caller_number).toBe("+33180000000");
    } finally {
      await db.end();
    }
  });
});

describe("migrate: statistics", () => {
  test("the tables a migration creates and fills have statistics once it is applied", async () => {
    const db = await createTestDatabase();
    try {
      // A table made and filled, with no index (an index's build would count its rows too).
      const probe = {
        name: "9999_statistics_probe",
        sql: "create table statistics_probe (n integer); insert into statistics_probe select generate_series(1, 1000);",
      };
      expect(await migrate(db.sql, undefined, [...migrations, probe])).toEqual([probe.name]);
      const [row] = await db.sql<{ rows: number }[]>`
        select reltuples::int as rows from pg_class where relname = 'statistics_probe'`;
      // Never analyzed, it would be -1: the planner would guess its size.
      expect(row!.rows).toBe(1000);
    } finally {
      await db.close();
    }
  });
});

describe("the list of migrations", () => {
  test("every file of sql/ is in it, in the order of their names, and nothing else", async () => {
    const { readdirSync } = await import("node:fs");
    const files = readdirSync(new URL("../../sql/", import.meta.url))
      .filter((f) => f.endsWith(".sql"))
      .map((f) => f.replace(/\.sql$/, ""))
      .sort();
    expect(migrations.map((m) => m.name)).toEqual(files);
  });
});
