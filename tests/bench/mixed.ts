/**
 * The API as a user meets it: a real server process, load from autocannon in a second process, on a
 * calls table grown to 100,000 rows, with 10,000 simulated calls in flight (each playing its steps and
 * writing its events) and their webhooks being delivered to a local receiver.
 *
 *   npm run bench:mixed -- [--db postgres,embedded] [--autovacuum off,on] [--rows 100000]
 *                          [--inflight 10000] [--seconds 10] [--connections 32] [--depth N]
 *                          [--pair-connections 64] [--idle 0]
 *
 * Measured, each for `--seconds` at `--connections`:
 * - first page     GET /api/v1/calls?limit=20
 * - deep page      the same after a cursor `--depth` items deep (default: 5,000, or half the grown rows
 *                  if fewer), found by walking the list right before the measure (the calls created
 *                  since the table grew are in front of the grown ones); its ratio to the first page
 * - create         POST /api/v1/calls with a test key (simulated calls: they join those in flight)
 * - pairs          at `--pair-connections`: mint a test session token, then redeem it from its own
 *                  client address (the server trusts 127.0.0.1 as a proxy and reads X-Forwarded-For):
 *                  pairs per second, and each pair's latency from the mint's request to the redeem's
 *                  answer
 * - agents         GET /api/v1/agents, against a bare Bun.serve answering the same JSON in a process of
 *                  its own, in the same run (the ratio of the two)
 *
 * `--idle S` (default 0, off) first measures the background alone: S seconds with no request, the CPU
 * of the server process and of every PostgreSQL backend (per cent of one core, from /proc) and the
 * webhooks received per second, while the calls in flight play their steps and their events go out.
 * The measures after it then start S seconds later in the calls' lives.
 *
 * `--autovacuum on,off` runs PostgreSQL with the server setting each way (ALTER SYSTEM, then reload;
 * ALTER SYSTEM RESET at the end gives the server its configured value back). The table grows before the server starts and
 * is not analyzed by the benchmark: keeping statistics fresh is the service's own job. Figures only.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { composeDeps } from "../../src/compose.ts";
import { openDatabase } from "../../src/db/engine/connection.ts";
import { migrate } from "../../src/db/engine/migrate.ts";
import { parseEnv } from "../../src/env.ts";
import { silentLogger } from "../../src/log.ts";
import { bunPgliteFiles } from "../../src/runtime/bunFiles.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import {
  cpuWhile,
  freshPostgres,
  type LoadResult,
  load,
  machine,
  PG_ADMIN_URL,
  ROOT,
  startServer,
  tempDataDir,
} from "./lib.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
}
const DBS = arg("db", "postgres,embedded").split(",");
const AUTOVACUUM = arg("autovacuum", "off,on").split(",");
const ROWS = Number(arg("rows", "100000"));
const INFLIGHT = Number(arg("inflight", "10000"));
const SECONDS = Number(arg("seconds", "10"));
const CONNECTIONS = Number(arg("connections", "32"));
const DEPTH = Number(arg("depth", String(Math.min(5000, Math.floor(ROWS / 2)))));
const PAIR_CONNECTIONS = Number(arg("pair-connections", "64"));
const IDLE = Number(arg("idle", "0"));
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef0123456789";

interface Seeded {
  key: string;
  agentId: string;
  organizationId: string;
}

/** An organization, an agent and a test key with every scope; the calls table grown to ROWS completed calls. */
async function seed(sql: postgres.Sql): Promise<Seeded> {
  const c = composeDeps({ sql, env: parseEnv({}), log: silentLogger });
  const org = await createOrganization(c, { name: "Bench", paidPlan: true, planMinutes: 1_000_000 });
  const agent = await createAgent(c, org.id, { name: "Reception" });
  const key = (await createSecretKey(c, org.id, { mode: "test", scopes: ["*"] })).key;
  // Completed simulated calls, one per second backwards, ids in the same order as their times.
  for (let done = 0; done < ROWS; done += 20_000) {
    const n = Math.min(20_000, ROWS - done);
    await sql`
      insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, variables,
        simulated_duration_seconds, started_at, ended_at, duration_seconds, summary, successful, outcome, created_at,
        updated_at)
      select 'call_00' || lpad((${ROWS} - (${done} + i))::text, 24, '0'), ${org.id}, false, 'completed', ${agent.id},
        '+33612345678', 'outbound', '{}', 45, now() - ((${done} + i) || ' seconds')::interval,
        now() - ((${done} + i) || ' seconds')::interval + interval '45 seconds', 45, 'A bench call.', true,
        'answered_human', now() - ((${done} + i) || ' seconds')::interval - interval '5 seconds',
        now() - ((${done} + i) || ' seconds')::interval + interval '45 seconds'
      from generate_series(1, ${n}) i`;
  }
  return { key, agentId: agent.id, organizationId: org.id };
}

/** Counts what the receiver is sent; answers 200 at once. */
function startReceiver() {
  let received = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      await req.arrayBuffer();
      received++;
      return new Response("ok");
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hooks`,
    received: () => received,
    stop: () => server.stop(true),
  };
}

/** A process of its own answering `body` as JSON on every request: the floor for GET /v1/agents. */
async function startBareServer(body: string) {
  const script = join(ROOT, "node_modules", ".cache", "bench-bare.ts");
  await Bun.write(
    script,
    `const body = ${JSON.stringify(body)};
const s = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(body, { headers: { "content-type": "application/json" } }) });
console.log(s.port);`,
  );
  const proc = Bun.spawn([process.execPath, script], { stdout: "pipe" });
  const reader = proc.stdout.getReader();
  const { value } = await reader.read();
  const port = Number(new TextDecoder().decode(value).trim());
  return { url: `http://127.0.0.1:${port}/`, stop: () => proc.kill() };
}

/** Pairs per second, and each pair's latency (mint + redeem), from tests/bench/pairs-load.mjs. */
interface PairResult {
  pairsPerSecond: number;
  p50: number;
  p99: number;
  /** Pairs whose mint or redeem was refused. */
  failed: number;
  errors: number;
}

async function pairs(url: string, s: Seeded): Promise<PairResult> {
  const proc = Bun.spawn(
    [
      "node",
      join(ROOT, "tests", "bench", "pairs-load.mjs"),
      JSON.stringify({
        url,
        key: s.key,
        agentId: s.agentId,
        connections: PAIR_CONNECTIONS,
        seconds: SECONDS,
      }),
    ],
    { stdout: "pipe", stderr: "ignore", cwd: ROOT },
  );
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  return JSON.parse(out) as PairResult;
}

/**
 * The id of the call `depth` items into the list, walking it 100 at a time as a client would: the
 * cursor of a page `depth` deep, whatever was created since the table grew.
 */
async function cursorAtDepth(url: string, headers: Record<string, string>, depth: number): Promise<string> {
  let cursor: string | undefined;
  for (let seen = 0; seen < depth; ) {
    const limit = Math.min(100, depth - seen);
    const after = cursor ? `&starting_after=${cursor}` : "";
    const res = await fetch(`${url}/api/v1/calls?limit=${limit}${after}`, { headers });
    const page = (await res.json()) as { data: { id: string }[] };
    if (res.status !== 200 || page.data.length < limit)
      throw new Error(`the list ends before ${depth} calls`);
    cursor = page.data.at(-1)!.id;
    seen += limit;
  }
  return cursor!;
}

/**
 * The background's cost over `seconds` with no request: CPU per cent of one core (ticks are 1/100 s on
 * Linux) of the server and of PostgreSQL's backends together, and webhooks received per second.
 */
async function backgroundCpu(serverPid: number, seconds: number, received: () => number) {
  const hooks0 = received();
  const cpu = await cpuWhile(serverPid, () => Bun.sleep(seconds * 1000));
  return {
    server: cpu.server,
    postgres: cpu.postgres,
    webhooks: Math.round((received() - hooks0) / cpu.seconds),
  };
}

const fmt = (r: LoadResult) =>
  `${Math.round(r.requestsPerSecond)}/s p50 ${r.p50} ms p99 ${r.p99} ms${r.non2xx ? ` (${r.non2xx} non-2xx)` : ""}`;

async function run(label: string, env: Record<string, string>, s: Seeded) {
  const receiver = startReceiver();
  const server = await startServer({
    ...env,
    ADMIN_TOKEN,
    TRUST_PROXY: "127.0.0.1/32",
    WEBHOOK_ALLOW_PRIVATE_URLS: "true",
    SIMULATION_TIME_SCALE: "1",
  });
  const auth = { authorization: `Bearer ${s.key}` };
  const json = { ...auth, "content-type": "application/json" };
  try {
    const hook = await fetch(`${server.url}/api/v1/webhook-endpoints`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ url: receiver.url }),
    });
    if (hook.status !== 201) throw new Error(`webhook endpoint: ${hook.status} ${await hook.text()}`);
    // The calls in flight: each rings, answers and completes over about a minute, writing its events.
    const started = performance.now();
    const body = JSON.stringify({ agentId: s.agentId, to: "+33612345678" });
    let made = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (made < INFLIGHT) {
          made++;
          const res = await fetch(`${server.url}/api/v1/calls`, { method: "POST", headers: json, body });
          if (res.status !== 201) throw new Error(`create: ${res.status} ${await res.text()}`);
          await res.arrayBuffer();
        }
      }),
    );
    const inflightSeconds = (performance.now() - started) / 1000;
    // When each measure began, to set against the server's log (BENCH_SERVER_LOG).
    const began: string[] = [];
    const mark = (name: string) => began.push(`${name} ${new Date().toISOString().slice(11, 19)}`);

    let background = "";
    if (IDLE > 0) {
      mark("idle");
      const cpu = await backgroundCpu(server.pid, IDLE, receiver.received);
      background = `  background   server ${cpu.server}% of a core, PostgreSQL backends ${cpu.postgres}%, webhooks ${cpu.webhooks}/s (${IDLE} s, no request)`;
    }
    mark("first");
    const first = await load({
      url: `${server.url}/api/v1/calls?limit=20`,
      connections: CONNECTIONS,
      seconds: SECONDS,
      headers: auth,
    });
    // Found now: calls created until this moment are in front of it.
    const deepCursor = await cursorAtDepth(server.url, auth, DEPTH);
    mark("deep");
    const deepPage = await load({
      url: `${server.url}/api/v1/calls?limit=20&starting_after=${deepCursor}`,
      connections: CONNECTIONS,
      seconds: SECONDS,
      headers: auth,
    });
    mark("create");
    const create = await load({
      url: `${server.url}/api/v1/calls`,
      connections: CONNECTIONS,
      seconds: SECONDS,
      method: "POST",
      headers: json,
      body,
    });
    mark("pairs");
    const pairResult = await pairs(server.url, s);
    const agentsBody = await (await fetch(`${server.url}/api/v1/agents`, { headers: auth })).text();
    const bare = await startBareServer(agentsBody);
    let agents: LoadResult;
    let floor: LoadResult;
    try {
      mark("agents");
      agents = await load({
        url: `${server.url}/api/v1/agents`,
        connections: CONNECTIONS,
        seconds: SECONDS,
        headers: auth,
      });
      floor = await load({ url: bare.url, connections: CONNECTIONS, seconds: SECONDS });
    } finally {
      bare.stop();
    }
    console.log(
      `\n${label}: ${ROWS.toLocaleString("en")} calls grown, ${INFLIGHT.toLocaleString("en")} in flight ` +
        `(made in ${inflightSeconds.toFixed(1)} s), webhooks received so far ${receiver.received()}`,
    );
    if (background) console.log(background);
    console.log(`  first page   ${fmt(first)}`);
    console.log(
      `  deep page    ${fmt(deepPage)}  (${DEPTH.toLocaleString("en")} deep; deep/first p99 ×${(deepPage.p99 / Math.max(first.p99, 1)).toFixed(2)})`,
    );
    console.log(`  create       ${fmt(create)}`);
    console.log(
      `  pairs        ${Math.round(pairResult.pairsPerSecond)}/s p50 ${pairResult.p50} ms p99 ${pairResult.p99} ms ` +
        `per pair (mint + redeem), ${PAIR_CONNECTIONS} connections` +
        `${pairResult.failed ? ` (${pairResult.failed} refused)` : ""}${pairResult.errors ? ` (${pairResult.errors} errors)` : ""}`,
    );
    console.log(
      `  agents       ${fmt(agents)}  vs bare Bun.serve ${fmt(floor)}  (×${(agents.requestsPerSecond / floor.requestsPerSecond).toFixed(2)})`,
    );
    console.log(`  began (UTC)  ${began.join(", ")}`);
  } finally {
    await server.stop().catch((err: Error) => console.log(`  (server stop: ${err.message})`));
    receiver.stop();
  }
}

async function withAutovacuum<T>(value: string, fn: () => Promise<T>): Promise<T> {
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`alter system set autovacuum = ${value === "on" ? "on" : "off"}`);
    await admin`select pg_reload_conf()`;
    await Bun.sleep(200);
    return await fn();
  } finally {
    await admin.unsafe("alter system reset autovacuum").catch(() => {});
    await admin`select pg_reload_conf()`.catch(() => {});
    await admin.end();
  }
}

console.log(
  `bench:mixed — ${machine()}, ${CONNECTIONS} connections (pairs ${PAIR_CONNECTIONS}), ${SECONDS} s per measure`,
);
for (const kind of DBS) {
  if (kind === "postgres") {
    for (const av of AUTOVACUUM) {
      await withAutovacuum(av, async () => {
        const pg = await freshPostgres();
        try {
          const db = await openDatabase({ url: pg.url, dataDir: "", log: silentLogger });
          await migrate(db.sql);
          const seeded = await seed(db.sql);
          await db.close();
          await run(`PostgreSQL, autovacuum ${av}`, { DATABASE_URL: pg.url }, seeded);
        } finally {
          await pg.drop();
        }
      });
    }
  } else {
    const dir = tempDataDir();
    try {
      const db = await openDatabase({ dataDir: dir, log: silentLogger, pglite: bunPgliteFiles });
      await migrate(db.sql);
      const seeded = await seed(db.sql);
      await db.close();
      await run("embedded", { DATA_DIR: dir }, seeded);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
