/**
 * Web calls against a real server process (`bun src/main.ts serve`) on 127.0.0.1, this process being
 * the load generator (a small Bun client: autocannon cannot vary headers per request).
 *
 *   npm run bench:webcalls -- [--db postgres,embedded] [--connections 64] [--warmup 3000]
 *                             [--pairs 10000] [--calls 1500] [--seconds 20] [--rate 2000]
 *
 * warm-up      the pairs below, not counted: the first thousands of requests run while the JIT
 *              compiles the hot paths (measured: a 4,000-pair run from a cold server reports ~20 %
 *              fewer pairs/s than the same server warm).
 * pairs        mint a test session token (POST /api/v1/web-call-sessions) then redeem it
 *              (POST /api/v1/web-calls): completed pairs per second and latency of a pair (p50, p99),
 *              each of the connections starting its next pair when its last one ended (closed loop).
 * paced        the same pairs offered at a fixed rate (`--rate`, pairs/s; 0 skips it) over the same
 *              connections: latency at that load, counted from when each pair was due. A closed loop
 *              cannot show it: with 64 pairs always in flight the mean pair takes 64 / (pairs/s).
 * publishable  POST /api/v1/web-calls with a publishable key, the fake bot check and the fake LiveKit
 *              (real HTTP servers in this process): live calls started per second and latency.
 *
 * The per-address rate limit (6 per 10 minutes) would stop a load test from one address, so the
 * server runs with TRUST_PROXY=127.0.0.1/32 and every request carries its own X-Forwarded-For.
 * Each phase stops at its count or its time bound, whichever comes first. Figures only; never fails
 * on speed. BENCH_KEEP_DB=1 keeps the PostgreSQL database afterwards (its URL is printed) for
 * looking at plans and tables; drop it by hand.
 */
import { startFakeCaptcha } from "../helpers/fakeCaptcha.ts";
import { startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { freshPostgres, machine, percentile, startServer, tempDataDir } from "./lib.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
}
const DBS = arg("db", "postgres,embedded").split(",");
const CONNECTIONS = Number(arg("connections", "64"));
const WARMUP = Number(arg("warmup", "3000"));
const PAIRS = Number(arg("pairs", "10000"));
const CALLS = Number(arg("calls", "1500"));
const SECONDS = Number(arg("seconds", "20"));
const RATE = Number(arg("rate", "2000"));
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef0123456789";
const ORIGIN = "https://shop.example.com";

/** Paced phase: how late each pair started (this process busy, or every connection taken). */
const lateStarts: number[] = [];

let addressSeq = 0;
/** A distinct client address per request (10.x.y.z), read by the server through TRUST_PROXY. */
function nextAddress(): string {
  addressSeq += 1;
  return `10.${(addressSeq >> 16) & 255}.${(addressSeq >> 8) & 255}.${addressSeq & 255}`;
}

interface PhaseResult {
  done: number;
  failed: number;
  perSecond: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
}

/**
 * Runs `job` with `connections` workers until `count` jobs were started or `seconds` elapsed. Closed
 * loop by default: each worker starts its next job when the last one ended. With `ratePerSecond`,
 * job i is due at i / rate seconds and a worker waits for that moment; its latency is counted from
 * the moment it was due, not from when a worker was free to start it, so a stall that delays later
 * jobs counts against all of them (no coordinated omission).
 */
async function phase(count: number, job: () => Promise<string>, ratePerSecond = 0): Promise<PhaseResult> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let started = 0;
  let failed = 0;
  const t0 = performance.now();
  const deadline = t0 + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (started < count && performance.now() < deadline) {
        const index = started++;
        let s = performance.now();
        if (ratePerSecond > 0) {
          const due = t0 + (index * 1000) / ratePerSecond;
          if (due > s) await Bun.sleep(due - s);
          lateStarts.push(performance.now() - due);
          s = due;
        }
        let outcome: string;
        try {
          outcome = await job();
        } catch (err) {
          outcome = `error ${(err as Error).message.slice(0, 40)}`;
        }
        statuses[outcome] = (statuses[outcome] ?? 0) + 1;
        if (outcome === "ok") latencies.push(performance.now() - s);
        else failed++;
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    done: latencies.length,
    failed,
    perSecond: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    statuses,
  };
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

async function run(kind: string) {
  const liveKit = await startFakeLiveKit();
  const captcha = await startFakeCaptcha();
  const pg = kind === "postgres" ? await freshPostgres("vs_bench_webcalls") : null;
  const db: Record<string, string> = pg ? { DATABASE_URL: pg.url } : { DATA_DIR: tempDataDir() };
  const server = await startServer(
    {
      ...db,
      ...liveKit.env,
      ...captcha.env,
      ADMIN_TOKEN,
      TRUST_PROXY: "127.0.0.1/32",
      LOG_LEVEL: "error",
      // Simulated calls would otherwise play out (3 timers each) during the measure; this defers them
      // past its end so the figures are those of the two routes.
      SIMULATION_TIME_SCALE: "100",
    },
    60_000,
  );
  try {
    const org = await admin(server.url, "/organizations", {
      name: "Bench",
      paidPlan: true,
      planMinutes: 10_000_000,
    });
    const agent = await admin(server.url, `/organizations/${org.id}/agents`, { name: "Bench agent" });
    const testKey = (await admin(server.url, `/organizations/${org.id}/secret-keys`, {
      mode: "test",
      scopes: ["webcalls:write"],
    })) as { key: string };
    const publishable = (await admin(server.url, `/organizations/${org.id}/publishable-keys`, {
      agentId: agent.id,
      allowedOrigins: [ORIGIN],
      monthlyMinuteCap: 10_000_000,
    })) as { key: string };

    let mintMs: number[] = [];
    let redeemMs: number[] = [];
    const pair = async () => {
      const t0 = performance.now();
      const minted = await fetch(`${server.url}/api/v1/web-call-sessions`, {
        method: "POST",
        headers: { authorization: `Bearer ${testKey.key}`, "content-type": "application/json" },
        body: JSON.stringify({ agentId: agent.id, variables: { bench: true } }),
      });
      if (minted.status !== 201) return `mint ${minted.status}`;
      const { token } = (await minted.json()) as { token: string };
      const t1 = performance.now();
      const started = await fetch(`${server.url}/api/v1/web-calls`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: ORIGIN, "x-forwarded-for": nextAddress() },
        body: JSON.stringify({ sessionToken: token }),
      });
      await started.arrayBuffer();
      mintMs.push(t1 - t0);
      redeemMs.push(performance.now() - t1);
      return started.status === 201 ? "ok" : `redeem ${started.status}`;
    };
    const warmup = await phase(WARMUP, pair);
    mintMs = [];
    redeemMs = [];
    const pairs = await phase(PAIRS, pair);
    const pairMs = { mint: mintMs, redeem: redeemMs };
    mintMs = [];
    redeemMs = [];
    const paced = RATE > 0 ? await phase(PAIRS, pair, RATE) : null;
    const pacedMs = { mint: mintMs, redeem: redeemMs };
    mintMs = pairMs.mint;
    redeemMs = pairMs.redeem;

    mintMs.sort((a, b) => a - b);
    redeemMs.sort((a, b) => a - b);

    let seq = 0;
    const calls = await phase(CALLS, async () => {
      const captchaToken = captcha.token(`bench-${++seq}`);
      const res = await fetch(`${server.url}/api/v1/web-calls`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: ORIGIN, "x-forwarded-for": nextAddress() },
        body: JSON.stringify({ publishableKey: publishable.key, captchaToken }),
      });
      await res.arrayBuffer();
      return res.status === 201 ? "ok" : `start ${res.status}`;
    });

    const f = (n: number) => n.toFixed(1);
    console.log(
      `${kind.padEnd(9)} warm-up: ${warmup.done} pairs, ${f(warmup.perSecond)} pairs/s (not counted), ` +
        `failures ${JSON.stringify(warmup.failed ? warmup.statuses : {})}`,
    );
    console.log(
      `${kind.padEnd(9)} pairs: ${pairs.done} in bound, ${f(pairs.perSecond)} pairs/s, p50 ${f(pairs.p50)} ms, ` +
        `p99 ${f(pairs.p99)} ms, failures ${JSON.stringify(pairs.failed ? pairs.statuses : {})}`,
    );
    console.log(
      `${kind.padEnd(9)}   of which mint p50 ${f(percentile(mintMs, 50))} ms p99 ${f(percentile(mintMs, 99))} ms, ` +
        `redeem p50 ${f(percentile(redeemMs, 50))} ms p99 ${f(percentile(redeemMs, 99))} ms`,
    );
    if (paced) {
      pacedMs.mint.sort((a, b) => a - b);
      pacedMs.redeem.sort((a, b) => a - b);
      console.log(
        `${kind.padEnd(9)} paced at ${RATE} pairs/s: ${paced.done} pairs, ${f(paced.perSecond)} pairs/s, ` +
          `p50 ${f(paced.p50)} ms, p99 ${f(paced.p99)} ms, failures ${JSON.stringify(paced.failed ? paced.statuses : {})}`,
      );
      lateStarts.sort((a, b) => a - b);
      console.log(
        `${kind.padEnd(9)}   of which mint p99 ${f(percentile(pacedMs.mint, 99))} ms, ` +
          `redeem p99 ${f(percentile(pacedMs.redeem, 99))} ms, late start p50 ${f(percentile(lateStarts, 50))} ms ` +
          `p99 ${f(percentile(lateStarts, 99))} ms`,
      );
      lateStarts.length = 0;
    }
    console.log(
      `${kind.padEnd(9)} publishable: ${calls.done} calls, ${f(calls.perSecond)} calls/s, p50 ${f(calls.p50)} ms, ` +
        `p99 ${f(calls.p99)} ms, failures ${JSON.stringify(calls.failed ? calls.statuses : {})}, ` +
        `LiveKit requests ${liveKit.requests.length}, bot checks ${captcha.requests.length}`,
    );
  } finally {
    await server.stop();
    await liveKit.close();
    await captcha.close();
    if (process.env.BENCH_KEEP_DB) console.log("kept database", pg?.url);
    else await pg?.drop();
  }
}

console.log(`web calls benchmark: ${machine()}, ${CONNECTIONS} connections, ≤ ${SECONDS} s per phase`);
for (const kind of DBS) await run(kind);
