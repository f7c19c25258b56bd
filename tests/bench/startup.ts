/**
 * `npm run bench:startup`: cold start of `serve` to its first 200 on /api/openapi.json, and the
 * server's resident memory once idle, for PostgreSQL, the embedded database on an empty and on an
 * existing DATA_DIR, and (when dist/voice-service exists) the single executable.
 *
 * Each figure is the median of BENCH_RUNS runs (default 5) after one unmeasured warm-up run, which
 * also makes sure the embedded database template is cached. Needs PostgreSQL at TEST_PG_URL.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { PG_ADMIN_URL } from "../helpers/db.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const root = join(import.meta.dir, "..", "..");
const source = [process.execPath, join(root, "src", "main.ts")];
const binary = join(root, "dist", "voice-service");

interface Sample {
  ms: number;
  rssMb: number;
}

function freePort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

/** Spawns serve, polls until the first 200, waits for it to settle, reads VmRSS, stops it. */
async function measure(command: string[], env: Record<string, string>): Promise<Sample> {
  const port = freePort();
  const childEnv: Record<string, string | undefined> = { ...process.env, ...env, PORT: String(port) };
  if (!env.DATABASE_URL) delete childEnv.DATABASE_URL;
  const started = performance.now();
  const child = Bun.spawn([...command, "serve"], { env: childEnv, stdout: "ignore", stderr: "pipe" });
  let ms = 0;
  while (!ms) {
    if (child.exitCode !== null) throw new Error(`serve exited: ${await new Response(child.stderr).text()}`);
    if (performance.now() - started > 60_000) throw new Error("serve did not answer within 60 s");
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/openapi.json`);
      await res.arrayBuffer();
      if (res.status === 200) ms = performance.now() - started;
    } catch {
      await Bun.sleep(2);
    }
  }
  await Bun.sleep(1000);
  const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  child.kill("SIGTERM");
  if ((await child.exited) !== 0) throw new Error("serve did not exit cleanly on SIGTERM");
  return { ms, rssMb: rssKb / 1024 };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

async function scenario(name: string, run: () => Promise<Sample>) {
  await run(); // warm-up: file cache, template cache, first migration
  const samples: Sample[] = [];
  for (let i = 0; i < RUNS; i++) samples.push(await run());
  const ms = samples.map((s) => s.ms);
  return {
    scenario: name,
    "median ms": Math.round(median(ms)),
    "min ms": Math.round(Math.min(...ms)),
    "max ms": Math.round(Math.max(...ms)),
    "idle RSS MB": Math.round(median(samples.map((s) => s.rssMb))),
  };
}

const scratch = mkdtempSync(join(tmpdir(), "vs-bench-"));
const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
const dbName = `vs_bench_${Date.now()}`;
const rows = [];
try {
  await admin.unsafe(`create database ${dbName}`);
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${dbName}`);
  let n = 0;
  const freshDir = () => join(scratch, `empty-${n++}`);
  const existing = join(scratch, "existing");
  const existingBinary = join(scratch, "existing-binary");

  rows.push(await scenario("bun src/main.ts, PostgreSQL", () => measure(source, { DATABASE_URL: url })));
  rows.push(
    await scenario("bun src/main.ts, embedded, empty DATA_DIR", () =>
      measure(source, { DATA_DIR: freshDir() }),
    ),
  );
  rows.push(
    await scenario("bun src/main.ts, embedded, existing DATA_DIR", () =>
      measure(source, { DATA_DIR: existing }),
    ),
  );
  if (existsSync(binary)) {
    rows.push(
      await scenario("dist/voice-service, PostgreSQL", () => measure([binary], { DATABASE_URL: url })),
    );
    rows.push(
      await scenario("dist/voice-service, embedded, empty DATA_DIR", () =>
        measure([binary], { DATA_DIR: freshDir() }),
      ),
    );
    rows.push(
      await scenario("dist/voice-service, embedded, existing DATA_DIR", () =>
        measure([binary], { DATA_DIR: existingBinary }),
      ),
    );
  } else {
    console.log("dist/voice-service not found: run `npm run build` to include the executable");
  }
} finally {
  await admin.unsafe(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  rmSync(scratch, { recursive: true, force: true });
}

console.log(`cold start to the first 200 on /api/openapi.json; median of ${RUNS} runs after a warm-up`);
console.table(rows);
