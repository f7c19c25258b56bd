/**
 * `npm run bench:runtimes`: the same sources served by Bun and by Deno, side by side in one run on one
 * machine, each measure taken for both runtimes in turn (bun, deno, bun, deno …) so a change in the
 * machine's load touches both alike.
 *
 *   cold start   spawn of `src/main.ts serve` to its first 200 on /api/openapi.json: PostgreSQL (migrated
 *                by the warm-up run), embedded on an empty DATA_DIR (a new one each run), embedded on an
 *                existing DATA_DIR. Median of BENCH_RUNS runs (default 5) after one unmeasured run.
 *   idle RSS     resident memory 1 s after that first 200 (median of the same runs).
 *   agents       authenticated GET /api/v1/agents, 32 connections, autocannon in a second process,
 *                BENCH_SECONDS (default 10) after a 2 s warm-up: req/s, p50, p99.
 *   pairs        mint a test session token then redeem it (POST /api/v1/web-call-sessions, then
 *                POST /api/v1/web-calls), 64 connections from this process, closed loop, BENCH_SECONDS
 *                after BENCH_WARMUP_PAIRS (default 2000) unmeasured pairs: pairs/s, p50, p99.
 *
 * `--quick` (1 run, 3 s, 300 warm-up pairs) checks that everything works; its figures mean little.
 * `--db postgres,embedded` picks the databases of the load measures. Needs PostgreSQL at TEST_PG_URL.
 * Figures only; never fails on speed.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  closedLoop,
  freshPostgres,
  load,
  machine,
  RUNTIME_COMMANDS,
  type RuntimeName,
  rssMiB,
  type ServerProcess,
  startServer,
} from "./lib.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
}
const QUICK = process.argv.includes("--quick");
const RUNS = QUICK ? 1 : Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = QUICK ? 3 : Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_PAIRS = QUICK ? 300 : Number(process.env.BENCH_WARMUP_PAIRS ?? 2000);
const DBS = arg("db", "postgres,embedded").split(",");
const RUNTIMES = Object.keys(RUNTIME_COMMANDS) as RuntimeName[];
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef0123456789";
const ORIGIN = "https://shop.example.com";

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;

/** One cold start: to the first 200, then the idle RSS a second later; the server is stopped. */
async function coldStart(runtime: RuntimeName, env: Record<string, string>) {
  const server = await startServer({ LOG_LEVEL: "warn", ...env }, 120_000, runtime);
  await Bun.sleep(1000);
  const rss = await rssMiB(server.pid);
  await server.stop();
  return { ms: server.readyMs, rss };
}

async function coldStarts(rows: Record<string, string | number>[], pgUrl: string, scratch: string) {
  let fresh = 0;
  const scenarios: [string, (runtime: RuntimeName) => Record<string, string>][] = [
    ["PostgreSQL", () => ({ DATABASE_URL: pgUrl })],
    ["embedded, empty DATA_DIR", (runtime) => ({ DATA_DIR: join(scratch, `empty-${runtime}-${fresh++}`) })],
    // Each runtime its own existing folder, made by the warm-up run.
    ["embedded, existing DATA_DIR", (runtime) => ({ DATA_DIR: join(scratch, `existing-${runtime}`) })],
  ];
  for (const [name, env] of scenarios) {
    const samples: Record<RuntimeName, { ms: number; rss: number }[]> = { bun: [], deno: [] };
    for (const runtime of RUNTIMES) await coldStart(runtime, env(runtime)); // warm-up: caches, migrations
    for (let i = 0; i < RUNS; i++) {
      for (const runtime of RUNTIMES) samples[runtime].push(await coldStart(runtime, env(runtime)));
    }
    for (const runtime of RUNTIMES) {
      const ms = samples[runtime].map((s) => s.ms);
      rows.push({
        measure: `cold start, ${name}`,
        runtime,
        "median ms": round(median(ms)),
        "min ms": round(Math.min(...ms)),
        "max ms": round(Math.max(...ms)),
        "idle RSS MiB": round(median(samples[runtime].map((s) => s.rss)), 1),
      });
    }
  }
}

async function admin(url: string, path: string, json: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/api/admin/v1${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(json),
  });
  if (res.status !== 201) throw new Error(`admin ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

/** An organization with five agents, a live key for the agents and a test key for the pairs. */
async function seed(server: ServerProcess) {
  const org = await admin(server.url, "/organizations", { name: "Bench", paidPlan: true, planMinutes: 1000 });
  const agents = [];
  for (let i = 0; i < 5; i++)
    agents.push(await admin(server.url, `/organizations/${org.id}/agents`, { name: `Agent ${i}` }));
  const live = await admin(server.url, `/organizations/${org.id}/secret-keys`, {
    mode: "live",
    scopes: ["*"],
  });
  const test = await admin(server.url, `/organizations/${org.id}/secret-keys`, {
    mode: "test",
    scopes: ["*"],
  });
  return { agentId: String(agents[0]!.id), liveKey: String(live.key), testKey: String(test.key) };
}

let addressSeq = 0;
/** A distinct client address per redemption (10.x.y.z), read through TRUST_PROXY: no rate limit in the way. */
function nextAddress(): string {
  addressSeq += 1;
  return `10.${(addressSeq >> 16) & 255}.${(addressSeq >> 8) & 255}.${addressSeq & 255}`;
}

async function loads(rows: Record<string, string | number>[], db: string, runtime: RuntimeName) {
  const pg = db === "postgres" ? await freshPostgres("vs_bench_runtimes") : null;
  const dataDir = pg ? null : mkdtempSync(join(tmpdir(), "vs-bench-"));
  const server = await startServer(
    {
      ...(pg ? { DATABASE_URL: pg.url } : { DATA_DIR: dataDir! }),
      ADMIN_TOKEN,
      TRUST_PROXY: "127.0.0.1/32",
      LOG_LEVEL: "error",
      // Simulated calls would otherwise play out during the measure: deferred past its end.
      SIMULATION_TIME_SCALE: "100",
    },
    120_000,
    runtime,
  );
  try {
    const s = await seed(server);
    const headers = { authorization: `Bearer ${s.liveKey}` };
    const url = `${server.url}/api/v1/agents`;
    await load({ url, connections: 32, seconds: 2, headers });
    const agents = await load({ url, connections: 32, seconds: SECONDS, headers });
    rows.push({
      measure: `GET /api/v1/agents, ${db}`,
      runtime,
      "per second": agents.requestsPerSecond,
      "p50 ms": agents.p50,
      "p99 ms": agents.p99,
      failures: agents.non2xx + agents.errors,
      "RSS after MiB": await rssMiB(server.pid),
    });

    const pair = async () => {
      const minted = await fetch(`${server.url}/api/v1/web-call-sessions`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.testKey}`, "content-type": "application/json" },
        body: JSON.stringify({ agentId: s.agentId }),
      });
      if (minted.status !== 201) return `mint ${minted.status}`;
      const { token } = (await minted.json()) as { token: string };
      const started = await fetch(`${server.url}/api/v1/web-calls`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: ORIGIN, "x-forwarded-for": nextAddress() },
        body: JSON.stringify({ sessionToken: token }),
      });
      await started.arrayBuffer();
      return started.status === 201 ? "ok" : `redeem ${started.status}`;
    };
    await closedLoop({ connections: 64, seconds: SECONDS, count: WARMUP_PAIRS, job: pair });
    const pairs = await closedLoop({
      connections: 64,
      seconds: SECONDS,
      count: Number.POSITIVE_INFINITY,
      job: pair,
    });
    rows.push({
      measure: `mint + redeem pairs, ${db}`,
      runtime,
      "per second": round(pairs.perSecond),
      "p50 ms": round(pairs.p50, 1),
      "p99 ms": round(pairs.p99, 1),
      failures: Object.values(pairs.failures).reduce((a, b) => a + b, 0),
      "RSS after MiB": await rssMiB(server.pid),
    });
  } finally {
    await server.stop();
    await pg?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

const versions = await Promise.all(
  RUNTIMES.map(async (r) => {
    const proc = Bun.spawn([...RUNTIME_COMMANDS[r], "--version"], { stdout: "pipe", stderr: "ignore" });
    const version = (await new Response(proc.stdout).text()).split("\n")[0]!.trim();
    return version.startsWith(r) ? version : `${r} ${version}`;
  }),
);
console.log(`Bun and Deno side by side: ${machine()}; ${versions.join(", ")}`);
console.log(`${RUNS} cold start run(s) per scenario, loads of ${SECONDS} s${QUICK ? " (--quick)" : ""}`);

const scratch = mkdtempSync(join(tmpdir(), "vs-bench-runtimes-"));
const pg = await freshPostgres("vs_bench_runtimes");
const starts: Record<string, string | number>[] = [];
try {
  await coldStarts(starts, pg.url, scratch);
} finally {
  await pg.drop();
  rmSync(scratch, { recursive: true, force: true });
}
console.table(starts);

const throughput: Record<string, string | number>[] = [];
for (const db of DBS) for (const runtime of RUNTIMES) await loads(throughput, db, runtime);
console.table(throughput);
