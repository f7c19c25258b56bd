/**
 * Shared pieces of the benchmarks: a server in a child process, a fresh PostgreSQL database, and
 * autocannon as a second process on 127.0.0.1. Benchmarks print figures; they never fail on speed.
 */
import { mkdtempSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";

export const ROOT = join(import.meta.dir, "..", "..");
export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

export function machine(): string {
  const cpu = cpus()[0]?.model ?? "unknown cpu";
  return `${cpus().length} cores (${cpu}), Bun ${Bun.version}, ${new Date().toISOString().slice(0, 10)}`;
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

/** Starts `bun src/main.ts serve` with the given environment and waits until it answers. */
export async function startServer(env: Record<string, string>, timeoutMs = 30_000): Promise<ServerProcess> {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const started = performance.now();
  // BENCH_CPU_PROF=<dir>: the server writes a CPU profile (Markdown) there when it stops.
  const profile = process.env.BENCH_CPU_PROF
    ? ["--cpu-prof-md", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`]
    : [];
  const proc = Bun.spawn([process.execPath, ...profile, "src/main.ts", "serve"], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: "warn", HOST: "127.0.0.1", PORT: String(port), ...env },
    stdout: "ignore",
    // BENCH_STDERR=1: the server's errors and warnings go to this terminal.
    stderr: process.env.BENCH_STDERR ? "inherit" : "ignore",
  });
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (performance.now() - started > timeoutMs) {
      proc.kill();
      throw new Error("server did not start in time");
    }
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
      await proc.exited;
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
