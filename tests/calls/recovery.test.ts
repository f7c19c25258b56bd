import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { depsFor, seedOrganization } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";
import { waitUntil } from "../helpers/wait.ts";
import { pool, type ServerProcess, startServer } from "./process.ts";

/**
 * `kill -9` with calls in flight, then a restart on the same database: every call completes, each
 * transition and event exactly once, and overdue timers fire within 2 s of the restart.
 * Always on PostgreSQL: the child process and this test share the database.
 */
let db: TestDatabase;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const children: ServerProcess[] = [];
const N = 300;
const env = () => ({ DATABASE_URL: db.url!, SIMULATION_TIME_SCALE: "0.05" });

beforeAll(async () => {
  db = await createTestDatabase("postgres");
  seed = await seedOrganization({ deps: depsFor(db.sql) }, { paidPlan: false });
  // The database notes when each timer row goes (firing a timer deletes it), so the takeover is timed
  // by what the server did, not by how soon this process looked.
  await db.sql`create table test_timer_deletions (id bigint primary key, at timestamptz not null)`;
  await db.sql`
    create function test_note_timer_deletion() returns trigger language plpgsql as $$
    begin
      insert into test_timer_deletions values (old.id, clock_timestamp());
      return old;
    end $$`;
  await db.sql`
    create trigger test_note_timer_deletion after delete on timers
    for each row execute function test_note_timer_deletion()`;
});
afterAll(async () => {
  for (const c of children) c.proc.kill(9);
  await db.close();
});

describe("kill -9 recovery", () => {
  test("every call completes after a crash and restart, each event exactly once", async () => {
    const first = await startServer(env());
    children.push(first);
    const ids = await pool(
      Array.from({ length: N }, (_, i) => i),
      16,
      async (i) => {
        const res = await fetch(`${first.url}/api/v1/calls`, {
          method: "POST",
          headers: { authorization: `Bearer ${seed.testKey}`, "content-type": "application/json" },
          body: JSON.stringify({ agentId: seed.agent.id, to: `+3361${String(i).padStart(7, "0")}` }),
        });
        expect(res.status).toBe(201);
        return (await res.json()).id as string;
      },
    );
    first.proc.kill(9);
    expect(await first.exited).not.toBe(0);
    const [open] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from calls where status <> 'completed'`;
    expect(open!.n).toBeGreaterThan(0);
    // The calls' timers the crash left behind (nothing moves them while no server runs).
    const left = await db.sql<{ id: string; due_at: Date }[]>`
      select id::text, due_at from timers where kind not in ('housekeeping', 'statistics')`;

    // Let some timers become overdue while no server runs.
    await Bun.sleep(300);
    const second = await startServer(env());
    children.push(second);
    // The restart: the moment the new server was up, by its own log.
    const listening = second.lines.find((l) => l.includes('"msg":"listening"'));
    const restarted = Date.parse(JSON.parse(listening!).time);
    const overdue = left.filter((t) => t.due_at.getTime() <= restarted).map((t) => t.id);
    expect(overdue.length).toBeGreaterThan(0);
    const fired = await waitUntil("the overdue timers to be taken over", async () => {
      const rows = await db.sql<{ at: Date }[]>`
        select at from test_timer_deletions where id = any(${overdue}::bigint[])`;
      return rows.length === overdue.length && rows.map((r) => r.at.getTime());
    });
    // Every one fired within 2 s of the restart, by the database's clock.
    expect(Math.max(...fired) - restarted).toBeLessThan(2000);

    await waitUntil(
      `all ${N} calls to complete`,
      async () => {
        const [r] = await db.sql<
          { n: number }[]
        >`select count(*)::int as n from calls where status = 'completed'`;
        return r!.n === N;
      },
      { timeoutMs: 20_000 },
    );
    await Bun.sleep(200);
    const perType = await db.sql<{ type: string; calls: number; events: number }[]>`
      select type, count(distinct coalesce(data->>'id', data->>'callId'))::int as calls, count(*)::int as events
      from events group by type order by type`;
    expect([...perType]).toEqual([
      { type: "call.analysis_ready", calls: N, events: N },
      { type: "call.ended", calls: N, events: N },
      { type: "call.started", calls: N, events: N },
      { type: "call.transcript_ready", calls: N, events: N },
    ]);
    const calls = await db.sql<{ id: string; ok: boolean }[]>`
      select id, (ended_at - started_at) = make_interval(secs => duration_seconds * 0.05) as ok from calls`;
    expect(calls.map((c) => c.id).sort()).toEqual([...ids].sort());
    expect(calls.every((c) => c.ok)).toBe(true);
    // Every call's timers are gone; what is left are the periodic timers, one of each.
    expect((await db.sql`select kind from timers order by kind`).map((t) => t.kind)).toEqual([
      "housekeeping",
      "statistics",
    ]);

    second.proc.kill("SIGTERM");
    expect(await second.exited).toBe(0);
    expect(second.lines.some((l) => l.includes('"msg":"timer runner stopped"'))).toBe(true);
  });
});
