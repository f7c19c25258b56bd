/**
 * Live phone calls against a real server process (`bun src/main.ts serve`) on 127.0.0.1, with the
 * fake LiveKit (real Twirp HTTP, in this process) as the carrier, autocannon as the load generator
 * in a second process.
 *
 *   npm run bench:live-calls -- [--db postgres,embedded] [--orgs 1,8] [--seconds 10] [--connections 32] [--rate 500]
 *
 * orgs     each figure is taken with the load on one organization, then spread over several (one key
 *          each, requests in turn): an organization's calls are admitted one at a time (its limits
 *          are exact across processes because each placement locks the organization's counters until
 *          it commits), so one organization's rate is bounded by that lock, not by the server.
 *
 * warm-up  2 s closed loop, not counted (the JIT compiles the hot paths).
 * closed   `connections` connections, each sending its next POST /api/v1/calls when the last one was
 *          answered, for `seconds`: live calls accepted (201) per second.
 * bursts   `rate` calls per second offered over the same connections by autocannon's -R for `seconds`.
 *          autocannon sends each connection's share of a second at the start of that second, as fast
 *          as the server answers, then waits for the next (even-load.mjs says where): 32 concurrent
 *          requests at each second's start. Kept for comparison with earlier figures.
 * even     `rate` calls per second at even intervals (even-load.mjs, a second process, at most
 *          `connections` keep-alive connections) for `seconds`, whatever the answers do: the 201's
 *          p50 / p99 at that load, each counted from when its request was due, and the accepted calls
 *          per second from the first request to the last answer (below `rate` when the server fell
 *          behind). This is the load the figures are for.
 * cpu      where each offered phase's time goes: CPU per cent of one core of the server, PostgreSQL's
 *          backends (none on the embedded database: it runs inside the server), this process (the fake
 *          LiveKit) and the load generator, and what the machine had left idle.
 * lag      with BENCH_LOOP_LAG=<folder>: how often the server's event loop ran late in the even phase, and
 *          whether its thread was working or waiting for a core meanwhile (loop-lag.ts).
 * dial     for every call accepted: the time from its creation (just before its 201) to the fake's
 *          receipt of its CreateSIPParticipant, p50 / p99 (of the even phase's calls, and of all), and
 *          that it was dialled exactly once.
 *
 * The fake answers every dial after 200 ms, and the callee hangs up 300 ms later (LiveKit's signed
 * participant_left webhook to the server), so calls end and the organization's limits
 * (maxConcurrentCalls 1,000, maxCallsPerHour 100,000) are not what bounds the figures. Figures only;
 * never fails on speed.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import type postgres from "postgres";
import { composeDeps } from "../../src/compose.ts";
import { openDatabase } from "../../src/db/engine/connection.ts";
import { migrate } from "../../src/db/engine/migrate.ts";
import { parseEnv } from "../../src/env.ts";
import { silentLogger } from "../../src/log.ts";
import { bunPgliteFiles } from "../../src/runtime/bunFiles.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { type FakeLiveKit, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import {
  cpuWhile,
  freshPostgres,
  type LoadResult,
  loopLag,
  machine,
  percentile,
  ROOT,
  startServer,
  tempDataDir,
} from "./lib.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
}
const DBS = arg("db", "postgres,embedded").split(",");
const SECONDS = Number(arg("seconds", "10"));
const CONNECTIONS = Number(arg("connections", "32"));
const RATE = Number(arg("rate", "500"));
const ORGS = arg("orgs", "1,8").split(",").map(Number);
const TRUNK = "ST_bench";

interface Seeded {
  key: string;
  agentId: string;
}

async function seed(sql: postgres.Sql, orgs: number): Promise<Seeded[]> {
  const out: Seeded[] = [];
  for (let i = 0; i < orgs; i++) out.push(await seedOne(sql, i));
  return out;
}

async function seedOne(sql: postgres.Sql, i: number): Promise<Seeded> {
  const c = composeDeps({ sql, env: parseEnv({}), log: silentLogger });
  const org = await createOrganization(c, {
    name: `Bench ${i}`,
    paidPlan: true,
    planMinutes: 10_000_000,
    maxConcurrentCalls: 1000,
    maxCallsPerHour: 100_000,
  });
  const agent = await createAgent(c, org.id, { name: "Caller" });
  return { key: (await createSecretKey(c, org.id, { mode: "live", scopes: ["*"] })).key, agentId: agent.id };
}

interface CallItem {
  id: string;
  status: string;
  createdAt: string;
}

/** Every live call, through the API (the embedded database is the server's alone). */
async function allCalls(url: string, key: string): Promise<CallItem[]> {
  const out: CallItem[] = [];
  let after: string | undefined;
  for (;;) {
    const res = await fetch(`${url}/api/v1/calls?limit=100${after ? `&starting_after=${after}` : ""}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const page = (await res.json()) as { data: CallItem[]; has_more: boolean };
    out.push(...page.data);
    if (!page.has_more) return out;
    after = page.data[page.data.length - 1]!.id;
  }
}

async function untilDialled(url: string, key: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const open = await Promise.all(
      ["initiated", "ringing"].map(async (status) => {
        const res = await fetch(`${url}/api/v1/calls?status=${status}&limit=1`, {
          headers: { authorization: `Bearer ${key}` },
        });
        return ((await res.json()) as { data: unknown[] }).data.length;
      }),
    );
    if (open.every((n) => n === 0)) return;
    await Bun.sleep(200);
  }
  console.log("  (some calls were still initiated or ringing after 60 s)");
}

/** POST /api/v1/calls from a second process, each request with the next organization's key. */
async function loadCalls(
  url: string,
  seeded: Seeded[],
  opts: { seconds: number; rate?: number; even?: boolean },
) {
  const proc = Bun.spawn(
    [
      "node",
      join(ROOT, "tests", "bench", opts.even ? "even-load.mjs" : "rotating-load.mjs"),
      JSON.stringify({
        url,
        path: "/api/v1/calls",
        method: "POST",
        connections: CONNECTIONS,
        maxConnections: CONNECTIONS,
        seconds: opts.seconds,
        ...(opts.rate ? { rate: opts.rate } : {}),
        requests: seeded.map((s) => ({
          headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" },
          body: JSON.stringify({ agentId: s.agentId, to: "+33612345678", variables: { bench: true } }),
        })),
      }),
    ],
    { stdout: "pipe", stderr: "ignore", cwd: ROOT },
  );
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  return JSON.parse(out) as LoadResult & {
    cpuMs: number;
    /** even-load.mjs only: how late it sent a request at its worst. */
    latestSendMs?: number;
    acceptedPerSecond: number;
    statusCodes: Record<string, number>;
  };
}

/** Where the CPU goes while `work` runs, per cent of one core (lib.ts's `cpuWhile`, with this process and the load generator). */
async function cpuSplit<T extends { cpuMs: number }>(serverPid: number, work: () => Promise<T>) {
  const me0 = process.cpuUsage();
  const { result, seconds, server, postgres, idle } = await cpuWhile(serverPid, work);
  const me = process.cpuUsage(me0);
  const split = {
    server,
    postgres,
    fakeLiveKit: Math.round((me.user + me.system) / 10_000 / seconds),
    load: Math.round(result.cpuMs / 10 / seconds),
    idle,
  };
  return { result, split };
}

async function run(label: string, env: Record<string, string>, seeded: Seeded[], liveKit: FakeLiveKit) {
  const server = await startServer({ ...env, ...liveKit.env, LIVEKIT_SIP_TRUNK_ID: TRUNK });
  liveKit.hangUpAfter({ afterMs: 300, webhookUrl: `${server.url}/api/livekit/webhook` });
  try {
    await loadCalls(server.url, seeded, { seconds: 2 });
    const closed = await loadCalls(server.url, seeded, { seconds: SECONDS });
    const { result: bursts, split: burstsSplit } = await cpuSplit(server.pid, () =>
      loadCalls(server.url, seeded, { seconds: SECONDS, rate: RATE }),
    );
    for (const s of seeded) await untilDialled(server.url, s.key);
    const evenFrom = Date.now();
    const { result: even, split: evenSplit } = await cpuSplit(server.pid, () =>
      loadCalls(server.url, seeded, { seconds: SECONDS, rate: RATE, even: true }),
    );
    const evenTo = Date.now();
    for (const s of seeded) await untilDialled(server.url, s.key);

    const calls = (await Promise.all(seeded.map((s) => allCalls(server.url, s.key)))).flat();
    const dials = new Map<string, Date[]>();
    for (const d of liveKit.dials) dials.set(d.identity, [...(dials.get(d.identity) ?? []), d.receivedAt]);
    let once = 0;
    let never = 0;
    let twice = 0;
    const latency: number[] = [];
    const evenLatency: number[] = [];
    for (const c of calls) {
      const times = dials.get(`sip_${c.id}`) ?? [];
      if (times.length === 1) once++;
      else if (times.length === 0) never++;
      else twice++;
      if (times[0]) {
        const ms = times[0].getTime() - Date.parse(c.createdAt);
        latency.push(ms);
        const at = Date.parse(c.createdAt);
        if (at >= evenFrom && at <= evenTo) evenLatency.push(ms);
      }
    }
    latency.sort((a, b) => a - b);
    evenLatency.sort((a, b) => a - b);
    const statuses: Record<string, number> = {};
    for (const c of calls) statuses[c.status] = (statuses[c.status] ?? 0) + 1;
    const ms = (r: LoadResult) => `${r.p50} / ${r.p99}`;
    const dial = (sorted: number[]) => `${percentile(sorted, 50)} / ${percentile(sorted, 99)}`;
    console.log(
      `| ${label} | ${closed.acceptedPerSecond} | ${ms(closed)} | ${bursts.acceptedPerSecond} | ${ms(bursts)} | ` +
        `${even.acceptedPerSecond} | ${ms(even)} | ${dial(evenLatency)} | ${dial(latency)} | ` +
        `${calls.length}: ${once} once, ${never} never, ${twice} more |`,
    );
    console.log(`  statuses: ${JSON.stringify(statuses)}`);
    const refused = (r: { statusCodes: Record<string, number> }) =>
      JSON.stringify(
        Object.fromEntries(Object.entries(r.statusCodes).filter(([code]) => !code.startsWith("2"))),
      );
    if (closed.non2xx + bursts.non2xx + even.non2xx + even.errors > 0)
      console.log(
        `  refused: closed ${refused(closed)}, bursts ${refused(bursts)}, even ${refused(even)} (${even.errors} errors)`,
      );
    const cpu = (s: typeof burstsSplit) =>
      `server ${s.server}, PostgreSQL ${s.postgres}, fake LiveKit ${s.fakeLiveKit}, load ${s.load}, idle ${s.idle}`;
    console.log(`  CPU, % of one core: bursts: ${cpu(burstsSplit)}; even: ${cpu(evenSplit)}`);
    console.log(`  even: the sender was ${even.latestSendMs} ms late at most`);
    // Written by the server every second: give it one more before reading.
    if (process.env.BENCH_LOOP_LAG) await Bun.sleep(1100);
    const lag = loopLag(server.pid, evenFrom, evenTo);
    if (lag)
      console.log(
        `  even: the server's event loop came > 10 ms late ${lag.times} times, ${lag.lateMs} ms in all (at most ${lag.maxMs}); ` +
          `its thread meanwhile ran ${lag.runningMs} ms and waited for a core ${lag.waitingMs} ms`,
      );
  } finally {
    liveKit.hangUpAfter(null);
    await server.stop();
  }
}

console.log(
  `POST /api/v1/calls (live), ${CONNECTIONS} connections, ${SECONDS} s each: closed loop, ${RATE}/s in autocannon's bursts, ${RATE}/s at even intervals; ` +
    `the fake LiveKit answers after 200 ms; ${machine()}`,
);
console.log(
  "| database | closed: accepted/s | closed: 201 p50 / p99 ms | bursts: accepted/s | bursts: 201 p50 / p99 ms | " +
    "even: accepted/s | even: 201 p50 / p99 ms | even: 201 → dial p50 / p99 ms | all: 201 → dial p50 / p99 ms | dialled |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|");

for (const kind of DBS) {
  for (const orgs of ORGS) {
    const label = `${kind === "postgres" ? "PostgreSQL" : "embedded"}, ${orgs} organization${orgs > 1 ? "s" : ""}`;
    const liveKit = await startFakeLiveKit();
    liveKit.setDefaultDial({ kind: "answer", afterMs: 200 });
    try {
      if (kind === "postgres") {
        const pg = await freshPostgres();
        try {
          const db = await openDatabase({ url: pg.url, dataDir: "", log: silentLogger });
          await migrate(db.sql);
          const seeded = await seed(db.sql, orgs);
          await db.close();
          await run(label, { DATABASE_URL: pg.url }, seeded, liveKit);
        } finally {
          await pg.drop();
        }
      } else {
        const dir = tempDataDir();
        try {
          const db = await openDatabase({ dataDir: dir, log: silentLogger, pglite: bunPgliteFiles });
          await migrate(db.sql);
          const seeded = await seed(db.sql, orgs);
          await db.close();
          await run(label, { DATA_DIR: dir }, seeded, liveKit);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }
    } finally {
      await liveKit.close();
    }
  }
}
