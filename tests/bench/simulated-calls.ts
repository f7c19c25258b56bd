/**
 * Durable timers under simulated calls, against real server processes (`bun src/main.ts serve`).
 *
 *   npm run bench:calls -- [--calls 10000] [--scale 1] [--db postgres,embedded]
 *                          [--throughput-calls 10000] [--recovery-calls 2000] [--two-calls 5000]
 *                          [--only inflight,throughput,recovery,two]
 *
 * inflight    N calls created over HTTP as fast as the server accepts them, at SIMULATION_TIME_SCALE;
 *             creation rate, transition lateness against schedule (runner's own measure, and from the
 *             events: call.started vs startedAt, call.ended vs endedAt), server CPU and RSS.
 * throughput  N calls whose first timers are already due when the server starts, delays ~0: durable
 *             transitions per second (3 per call, each a committed transaction's worth of work).
 * recovery    kill -9 with calls in flight, restart: time until every timer overdue at the restart has
 *             fired, and exactly-once checks (PostgreSQL).
 * two         two server processes on one database share the calls: no transition fired twice.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Sql } from "postgres";
import { openDatabase } from "../../src/db/engine/connection.ts";
import { migrate } from "../../src/db/engine/migrate.ts";
import { silentLogger } from "../../src/log.ts";
import { bunPgliteFiles } from "../../src/runtime/bunFiles.ts";
import { pool, type ServerProcess, startServer } from "../calls/process.ts";
import { depsFor, seedOrganization } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";
import { newId } from "../helpers/ids.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
}
const CALLS = Number(arg("calls", "10000"));
const SCALE = arg("scale", "1");
const DBS = arg("db", "postgres,embedded").split(",");
const THROUGHPUT_CALLS = Number(arg("throughput-calls", String(CALLS)));
const RECOVERY_CALLS = Number(arg("recovery-calls", "2000"));
const TWO_CALLS = Number(arg("two-calls", "5000"));
const ONLY = arg("only", "inflight,throughput,recovery,two").split(",");

type Kind = "postgres" | "embedded";

/** A database for one scenario: PostgreSQL (queried directly) or an embedded data folder. */
interface BenchDb {
  kind: Kind;
  env: Record<string, string>;
  /** Runs `fn` with SQL access; for the embedded database only while no server has it open. */
  withSql<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

async function benchDb(kind: Kind): Promise<BenchDb> {
  if (kind === "postgres") {
    const db: TestDatabase = await createTestDatabase("postgres");
    return { kind, env: { DATABASE_URL: db.url! }, withSql: (fn) => fn(db.sql), close: () => db.close() };
  }
  const dir = mkdtempSync(join(tmpdir(), "vs-bench-"));
  const withSql = async <T>(fn: (sql: Sql) => Promise<T>) => {
    const db = await openDatabase({ dataDir: dir, log: silentLogger, pglite: bunPgliteFiles });
    try {
      await migrate(db.sql);
      return await fn(db.sql);
    } finally {
      await db.close();
    }
  };
  return {
    kind,
    env: { DATA_DIR: dir },
    withSql,
    close: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function seed(db: BenchDb) {
  return db.withSql((sql) => seedOrganization({ deps: depsFor(sql) }, { paidPlan: false, planMinutes: 0 }));
}

/** CPU (% of one core) and RSS of a process, sampled once a second from /proc. */
function sampleProcess(pid: number) {
  const ticks = 100;
  const read = () => {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    const cpu = (Number(stat[11]) + Number(stat[12])) / ticks;
    const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
    return { cpu, rss };
  };
  const start = { ...read(), at: performance.now() };
  let peakRss = start.rss;
  let last = start;
  const timer = setInterval(() => {
    try {
      last = { ...read(), at: performance.now() };
      peakRss = Math.max(peakRss, last.rss);
    } catch {}
  }, 1000);
  return () => {
    clearInterval(timer);
    const seconds = (last.at - start.at) / 1000;
    return {
      cpuPercent: seconds > 0 ? Math.round(((last.cpu - start.cpu) / seconds) * 100) : 0,
      peakRssMiB: Math.round(peakRss),
    };
  };
}

const headers = (key: string) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" });

async function createCalls(url: string, key: string, agentId: string, n: number, concurrency = 64) {
  const t0 = performance.now();
  const ids = await pool(
    Array.from({ length: n }, (_, i) => i),
    concurrency,
    async (i) => {
      const res = await fetch(`${url}/api/v1/calls`, {
        method: "POST",
        headers: headers(key),
        body: JSON.stringify({ agentId, to: `+3361${String(i).padStart(7, "0")}` }),
      });
      if (res.status !== 201) throw new Error(`POST /v1/calls: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { id: string }).id;
    },
  );
  const seconds = (performance.now() - t0) / 1000;
  return { ids, seconds, perSecond: Math.round(n / seconds) };
}

/** True when no call of the key's mode is still in flight (asked through the API). */
async function allCompleted(url: string, key: string): Promise<boolean> {
  for (const status of ["initiated", "ringing", "ongoing"]) {
    const res = await fetch(`${url}/api/v1/calls?status=${status}&limit=1`, { headers: headers(key) });
    const body = (await res.json()) as { data: unknown[] };
    if (body.data.length > 0) return false;
  }
  return true;
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, stepMs = 250) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await Bun.sleep(stepMs);
  }
  throw new Error(`not done within ${timeoutMs} ms`);
}

/** SIGTERM, then the runner's own figures from its last log line. */
async function stop(server: ServerProcess) {
  server.proc.kill("SIGTERM");
  const code = await server.exited;
  const line = server.lines.find((l) => l.includes('"msg":"timer runner stopped"'));
  const stats = line ? JSON.parse(line) : null;
  return {
    code,
    fired: stats?.fired,
    transactions: stats?.transactions,
    failures: stats?.failures,
    latenessMs: stats?.latenessMs,
    breakdownMs: stats?.breakdownMs,
  };
}

function quantiles(values: number[]) {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
  return { p50: q(0.5), p99: q(0.99), max: s.at(-1)! };
}

/** Exactly-once checks and lateness measured from the outbox. */
async function audit(sql: Sql, n: number) {
  const [counts] = await sql<{ completed: number; timers: number }[]>`
    select (select count(*)::int from calls where status = 'completed') as completed,
           (select count(*)::int from timers) as timers`;
  const types = await sql<{ type: string; events: number; calls: number }[]>`
    select type, count(*)::int as events, count(distinct coalesce(data->>'id', data->>'callId'))::int as calls
    from events group by type order by type`;
  const exactlyOnce =
    counts!.completed === n && types.length === 4 && types.every((t) => t.events === n && t.calls === n);
  const lateness = await sql<{ started: number; ended: number }[]>`
    select
      extract(epoch from (s.created_at - c.started_at)) * 1000 as started,
      extract(epoch from (e.created_at - c.ended_at)) * 1000 as ended
    from calls c
    join events s on s.type = 'call.started' and s.data->>'id' = c.id
    join events e on e.type = 'call.ended' and e.data->>'id' = c.id`;
  return {
    completed: counts!.completed,
    timersLeft: counts!.timers,
    events: Object.fromEntries(types.map((t) => [t.type, t.events])),
    exactlyOnce,
    eventLatenessMs: {
      started: quantiles(lateness.map((r) => Number(r.started))),
      ended: quantiles(lateness.map((r) => Number(r.ended))),
    },
  };
}

async function inflight(kind: Kind) {
  const db = await benchDb(kind);
  try {
    const s = await seed(db);
    const server = await startServer({ ...db.env, SIMULATION_TIME_SCALE: SCALE });
    void server.exited.then((code) => {
      if (code !== 0) console.error(`server exited with ${code}:\n${server.lines.slice(-40).join("\n")}`);
    });
    const sample = sampleProcess(server.proc.pid);
    const created = await createCalls(server.url, s.testKey, s.agent.id, CALLS);
    const maxScheduleMs = (5 + 89) * 1000 * Number(SCALE);
    await waitUntil(() => allCompleted(server.url, s.testKey), maxScheduleMs + 120_000, 500);
    const proc = sample();
    const runner = await stop(server);
    const checks = await db.withSql((sql) => audit(sql, CALLS));
    return {
      database: kind,
      calls: CALLS,
      scale: Number(SCALE),
      creation: { seconds: Math.round(created.seconds * 10) / 10, perSecond: created.perSecond },
      runner,
      server: proc,
      ...checks,
    };
  } finally {
    await db.close();
  }
}

async function throughput(kind: Kind) {
  const db = await benchDb(kind);
  const n = THROUGHPUT_CALLS;
  try {
    const s = await seed(db);
    // Calls already `initiated` with their first timer due: the server finds a backlog at start.
    await db.withSql(async (sql) => {
      const ids = Array.from({ length: n }, () => newId("call"));
      await sql`
        insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction,
          simulated_duration_seconds, language, created_at, updated_at)
        select id, ${s.org.id}, false, 'initiated', ${s.agent.id}, '+33612345678', 'outbound',
          30 + (row_number() over () % 60)::int, 'en', now(), now()
        from unnest(${ids}::text[]) as id`;
      await sql`
        insert into timers (kind, due_at, payload)
        select 'call.simulation', now(), jsonb_build_object('callId', id, 'to', 'ringing')
        from unnest(${ids}::text[]) as id`;
    });
    const server = await startServer({ ...db.env, SIMULATION_TIME_SCALE: "0.00001" });
    const t0 = performance.now();
    const sample = sampleProcess(server.proc.pid);
    await waitUntil(() => allCompleted(server.url, s.testKey), 600_000, 100);
    const seconds = (performance.now() - t0) / 1000;
    const proc = sample();
    const runner = await stop(server);
    const checks = await db.withSql((sql) => audit(sql, n));
    return {
      database: kind,
      calls: n,
      transitions: 3 * n,
      seconds: Math.round(seconds * 100) / 100,
      transitionsPerSecond: Math.round((3 * n) / seconds),
      runner,
      server: proc,
      exactlyOnce: checks.exactlyOnce,
      events: checks.events,
    };
  } finally {
    await db.close();
  }
}

async function recovery() {
  const db = await benchDb("postgres");
  const n = RECOVERY_CALLS;
  try {
    const s = await seed(db);
    const env = { ...db.env, SIMULATION_TIME_SCALE: SCALE };
    const first = await startServer(env);
    await createCalls(first.url, s.testKey, s.agent.id, n);
    // Let the first steps start, then crash with everything in flight.
    await Bun.sleep(Math.min(3000, 3000 * Number(SCALE)));
    first.proc.kill(9);
    await first.exited;
    return await db.withSql(async (sql) => {
      const [inFlight] = await sql<
        { n: number }[]
      >`select count(*)::int as n from calls where status <> 'completed'`;
      await Bun.sleep(1000);
      const t0 = performance.now();
      const second = await startServer(env);
      const startMs = performance.now() - t0;
      const restartedAt = performance.now();
      const overdue = await sql<{ id: string }[]>`select id::text from timers where due_at <= now()`;
      await waitUntil(
        async () =>
          (await sql`select 1 from timers where id = any(${overdue.map((r) => r.id)}::bigint[]) limit 1`)
            .length === 0,
        60_000,
        10,
      );
      const overdueFiredMs = Math.round(performance.now() - restartedAt);
      await waitUntil(() => allCompleted(second.url, s.testKey), 95 * 1000 * Number(SCALE) + 60_000, 250);
      const allDoneMs = Math.round(performance.now() - restartedAt);
      await stop(second);
      const checks = await audit(sql, n);
      return {
        calls: n,
        inFlightAtKill: inFlight!.n,
        overdueAtRestart: overdue.length,
        serverStartMs: Math.round(startMs),
        overdueFiredWithinMsOfListening: overdueFiredMs,
        allCompletedMsAfterRestart: allDoneMs,
        exactlyOnce: checks.exactlyOnce,
        events: checks.events,
        timersLeft: checks.timersLeft,
      };
    });
  } finally {
    await db.close();
  }
}

async function twoProcesses() {
  const db = await benchDb("postgres");
  const n = TWO_CALLS;
  try {
    const s = await seed(db);
    const env = { ...db.env, SIMULATION_TIME_SCALE: SCALE };
    const a = await startServer(env);
    const b = await startServer(env);
    await Promise.all([
      createCalls(a.url, s.testKey, s.agent.id, Math.ceil(n / 2), 32),
      createCalls(b.url, s.testKey, s.agent.id, Math.floor(n / 2), 32),
    ]);
    await waitUntil(() => allCompleted(a.url, s.testKey), 95 * 1000 * Number(SCALE) + 120_000, 500);
    const [ra, rb] = await Promise.all([stop(a), stop(b)]);
    const checks = await db.withSql((sql) => audit(sql, n));
    return {
      calls: n,
      transitions: 3 * n,
      firedByA: ra.fired,
      firedByB: rb.fired,
      firedTotal: (ra.fired ?? 0) + (rb.fired ?? 0),
      noTransitionTwice: checks.exactlyOnce,
      events: checks.events,
    };
  } finally {
    await db.close();
  }
}

const results: Record<string, unknown> = {};
for (const kind of DBS as Kind[]) {
  if (ONLY.includes("inflight")) results[`inflight.${kind}`] = await inflight(kind);
  if (ONLY.includes("throughput")) results[`throughput.${kind}`] = await throughput(kind);
}
if (ONLY.includes("recovery")) results.recovery = await recovery();
if (ONLY.includes("two")) results.twoProcesses = await twoProcesses();
console.log(JSON.stringify(results, null, 2));
process.exit(0);
