/**
 * Shared pieces of the benchmarks: a server in a child process, a fresh PostgreSQL database, and
 * autocannon as a second process on 127.0.0.1. Benchmarks print figures; they never fail on speed.
 */
import { mkdtempSync, openSync, readFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";

export const ROOT = join(import.meta.dir, "..", "..");
export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

export function machine(): string {
  const cpu = cpus()[0]?.model ?? "unknown cpu";
  return `${cpus().length} cores (${cpu}), Bun ${Bun.version}, ${new Date().toISOString().slice(0, 10)}`;
}

/**
 * Runs `job` on `connections` workers, each starting its next job when its last one ended, until
 * `count` jobs were started or `seconds` elapsed. Returns the completed jobs per second and their
 * latency percentiles; a job answers "ok" or what went wrong.
 */
export async function closedLoop(opts: {
  connections: number;
  seconds: number;
  count: number;
  job: () => Promise<string>;
}): Promise<{ done: number; perSecond: number; p50: number; p99: number; failures: Record<string, number> }> {
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  let started = 0;
  const t0 = performance.now();
  const deadline = t0 + opts.seconds * 1000;
  await Promise.all(
    Array.from({ length: opts.connections }, async () => {
      while (started < opts.count && performance.now() < deadline) {
        started++;
        const s = performance.now();
        const outcome = await opts.job().catch((err: Error) => `error ${err.message.slice(0, 40)}`);
        if (outcome === "ok") latencies.push(performance.now() - s);
        else failures[outcome] = (failures[outcome] ?? 0) + 1;
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    done: latencies.length,
    perSecond: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    failures,
  };
}

/** A new empty PostgreSQL database; returns its URL and a drop function. */
export async function freshPostgres(prefix = "vs_bench"): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  return {
    url: PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`),
    drop: async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

export function tempDataDir(): string {
  return mkdtempSync(join(tmpdir(), "vs-bench-"));
}

export interface ServerProcess {
  url: string;
  pid: number;
  /** Milliseconds from spawn to the first 200 on /api/openapi.json. */
  readyMs: number;
  stop(): Promise<void>;
}

/** How to run `src/main.ts` on each runtime, as `npm start` and `npm run start:deno` do. */
export const RUNTIME_COMMANDS = {
  bun: [process.execPath],
  deno: [join(ROOT, "node_modules", ".bin", "deno"), "run", "-A"],
} as const;
export type RuntimeName = keyof typeof RUNTIME_COMMANDS;

/**
 * Starts `src/main.ts serve` (on Bun unless `runtime` says otherwise) with the given environment and
 * waits until it answers.
 */
export async function startServer(
  env: Record<string, string>,
  timeoutMs = 30_000,
  runtime: RuntimeName = "bun",
): Promise<ServerProcess> {
  // Below the ephemeral range (32768–60999 on Linux), where the benchmark's own outgoing connections
  // take their ports: a port picked there was sometimes in use, and the server exited at once.
  const port = 10000 + Math.floor(Math.random() * 22000);
  const started = performance.now();
  // BENCH_CPU_PROF=<dir>: the server writes a CPU profile there when it stops: Markdown on Bun; on Deno
  // V8's tick log (deno-<pid>.log), which `node --prof-process <file>` summarizes.
  const dir = process.env.BENCH_CPU_PROF;
  const profile = !dir
    ? []
    : runtime === "bun"
      ? ["--cpu-prof-md", `--cpu-prof-dir=${dir}`]
      : [`--v8-flags=--prof,--no-logfile-per-isolate,--logfile=${dir}/deno-%p.log`];
  const childEnv: Record<string, string | undefined> = {
    ...process.env,
    DENO_NO_UPDATE_CHECK: "1",
    NO_COLOR: "1",
  };
  if (!env.DATABASE_URL) delete childEnv.DATABASE_URL;
  // BENCH_SERVER_LOG=<file>: the server's log lines, debug included (what each statistics check
  // analyzed, what each vacuum pass did and how long), are appended there, to set against the phases.
  const serverLog = process.env.BENCH_SERVER_LOG;
  // BENCH_PRELOAD=<file>: a module the server (on Bun) loads first, to watch it from inside.
  const preload =
    process.env.BENCH_PRELOAD && runtime === "bun" ? ["--preload", process.env.BENCH_PRELOAD] : [];
  // BENCH_LOOP_LAG=<folder>: the server's event loop watched (loop-lag.ts; `loopLag` reads it).
  if (process.env.BENCH_LOOP_LAG && runtime === "bun")
    preload.push("--preload", join(ROOT, "tests", "bench", "loop-lag.ts"));
  const proc = Bun.spawn([...RUNTIME_COMMANDS[runtime], ...profile, ...preload, "src/main.ts", "serve"], {
    cwd: ROOT,
    env: {
      ...childEnv,
      LOG_LEVEL: serverLog ? "debug" : "warn",
      HOST: "127.0.0.1",
      PORT: String(port),
      ...env,
    },
    stdout: serverLog ? openSync(serverLog, "a") : "ignore",
    // BENCH_STDERR=1: the server's errors and warnings go to this terminal.
    stderr: process.env.BENCH_STDERR ? "inherit" : "ignore",
  });
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (performance.now() - started > timeoutMs) {
      proc.kill();
      throw new Error("server did not start in time");
    }
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode} before answering`);
    try {
      const res = await fetch(`${url}/api/openapi.json`);
      if (res.status === 200) break;
    } catch {}
    await Bun.sleep(5);
  }
  return {
    url,
    pid: proc.pid,
    readyMs: performance.now() - started,
    stop: async () => {
      proc.kill("SIGTERM");
      const code = await proc.exited;
      if (code !== 0) throw new Error(`server exited with ${code} on SIGTERM`);
    },
  };
}

/** Resident set size of a process in MiB, from /proc. */
export async function rssMiB(pid: number): Promise<number> {
  const status = await Bun.file(`/proc/${pid}/status`).text();
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round((kb / 1024) * 10) / 10;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  total: number;
}

/** Runs autocannon in a second process, bounded in time, and returns its figures. */
export async function load(opts: {
  url: string;
  connections: number;
  seconds: number;
  headers?: Record<string, string>;
  method?: string;
  body?: string;
  /** Requests per second offered over all connections (autocannon's overall rate); default: closed loop. */
  rate?: number;
}): Promise<LoadResult> {
  const args = [join(ROOT, "node_modules", ".bin", "autocannon"), "-j", "-c", String(opts.connections)];
  args.push("-d", String(opts.seconds));
  if (opts.rate) args.push("-R", String(opts.rate));
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push("-H", `${k}=${v}`);
  if (opts.method) args.push("-m", opts.method);
  if (opts.body) args.push("-b", opts.body);
  args.push(opts.url);
  const proc = Bun.spawn(["node", ...args], { stdout: "pipe", stderr: "ignore" });
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  const r = JSON.parse(out);
  return {
    requestsPerSecond: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    total: r.requests.total,
  };
}

/** The p-th percentile (0–100) of ascending values, nearest rank; NaN for no values. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** CPU time of a process so far, in clock ticks (user + system, 1/100 s on Linux), or 0 once it is gone. */
function cpuTicks(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** The PostgreSQL server's processes (the embedded database runs inside the server's). */
function postgresPids(): number[] {
  const out = Bun.spawnSync(["pgrep", "-u", "postgres", "postgres"]).stdout.toString().trim();
  return out ? out.split("\n").map(Number) : [];
}

/** The machine's idle time so far, in clock ticks summed over its cores (/proc/stat). */
function idleTicks(): number {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/);
  return Number(cpu[4]) + Number(cpu[5]);
}

/**
 * While `work` runs: CPU per cent of one core of the server process and of PostgreSQL's backends
 * together (none on the embedded database: it runs inside the server), the machine's idle time in the
 * same unit (of 100 × cores), and the seconds it took.
 */
export async function cpuWhile<T>(serverPid: number, work: () => Promise<T>) {
  const pg = () => postgresPids().reduce((sum, pid) => sum + cpuTicks(pid), 0);
  const [s0, p0, i0, t0] = [cpuTicks(serverPid), pg(), idleTicks(), performance.now()];
  const result = await work();
  const seconds = (performance.now() - t0) / 1000;
  const pct = (ticks: number) => Math.round(ticks / seconds);
  return {
    result,
    seconds,
    server: pct(cpuTicks(serverPid) - s0),
    postgres: pct(pg() - p0),
    idle: pct(idleTicks() - i0),
  };
}

/**
 * What loop-lag.ts saw in server `pid` between two epoch times (BENCH_LOOP_LAG set, Bun only): how many
 * times its event loop came more than 10 ms late, how late in all and at most, and how much of that
 * its thread spent on a core and waiting for one. Null when nothing was recorded.
 */
export function loopLag(pid: number, from: number, to: number) {
  const dir = process.env.BENCH_LOOP_LAG;
  if (!dir) return null;
  let kept: number[][];
  try {
    kept = JSON.parse(readFileSync(join(dir, `${pid}.json`), "utf8"));
  } catch {
    return null;
  }
  const late = kept.filter(([at, ms]) => at! >= from && at! <= to && ms! > 10);
  const sum = (i: number) => Math.round(late.reduce((total, row) => total + row[i]!, 0));
  return {
    times: late.length,
    lateMs: sum(1),
    maxMs: Math.round(Math.max(0, ...late.map((row) => row[1]!))),
    runningMs: sum(2),
    waitingMs: sum(3),
  };
}
