/**
 * The in-memory wheel alone: cost per schedule, cancel and fire over N timers (default 1,000,000),
 * then firing lateness with the wheel driven in real time the way the runner drives it.
 *
 *   npm run bench:wheel -- [--count 1000000] [--spread-ms 5000]
 */
import { LatencyHistogram } from "../../src/timers/histogram.ts";
import { TimerWheel, type WheelTimer } from "../../src/timers/wheel.ts";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const N = arg("count", 1_000_000);
const SPREAD = arg("spread-ms", 5000);

/** Deterministic pseudo-random deadlines so runs compare. */
function deadlines(n: number, spread: number, seed = 1): Float64Array {
  const out = new Float64Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = (((t ^ (t >>> 14)) >>> 0) / 4294967296) * spread;
  }
  return out;
}

const ns = (ms: number, ops: number) => Math.round((ms * 1e6) / ops);

// 1. schedule
const due = deadlines(N, SPREAD);
let wheel = new TimerWheel<number>({ now: 0 });
let handles: WheelTimer<number>[] = new Array(N);
let t0 = performance.now();
for (let i = 0; i < N; i++) handles[i] = wheel.schedule(due[i]!, i);
const scheduleMs = performance.now() - t0;

// 2. cancel every timer
t0 = performance.now();
for (let i = 0; i < N; i++) wheel.cancel(handles[i]!);
const cancelMs = performance.now() - t0;
if (wheel.size !== 0) throw new Error("cancel left timers behind");

// 3. fire: schedule again, then advance through the whole span
wheel = new TimerWheel<number>({ now: 0 });
for (let i = 0; i < N; i++) wheel.schedule(due[i]!, i);
let fired = 0;
t0 = performance.now();
wheel.advance(SPREAD + 1, () => {
  fired++;
});
const fireMs = performance.now() - t0;
if (fired !== N) throw new Error(`fired ${fired} of ${N}`);

// The earlier sections' garbage is collected first, so its pauses are not counted as lateness.
handles = [];
wheel = new TimerWheel<number>({ now: 0 });
Bun.gc(true);

// 4. real-time lateness: deadlines spread over SPREAD ms from now, woken like the runner wakes.
const lateness = new LatencyHistogram();
const start = performance.now() + 50;
const live = new TimerWheel<number>({ now: performance.now() });
const realDue = deadlines(N, SPREAD, 7);
for (let i = 0; i < N; i++) live.schedule(start + realDue[i]!, start + realDue[i]!);
const cpu0 = process.cpuUsage();
const wall0 = performance.now();
await new Promise<void>((resolve) => {
  const tick = () => {
    const now = performance.now();
    live.advance(now, (deadline) => lateness.record(now - deadline));
    const next = live.nextDeadline();
    if (next === null) return resolve();
    setTimeout(tick, Math.max(0, next - performance.now()));
  };
  tick();
});
const cpu = process.cpuUsage(cpu0);
const wallMs = performance.now() - wall0;

const result = {
  timers: N,
  scheduleNsPerOp: ns(scheduleMs, N),
  cancelNsPerOp: ns(cancelMs, N),
  fireNsPerOp: ns(fireMs, N),
  realTime: {
    spreadMs: SPREAD,
    latenessMs: { p50: lateness.quantile(0.5), p99: lateness.quantile(0.99), max: lateness.max },
    cpuPercent: Math.round(((cpu.user + cpu.system) / 1000 / wallMs) * 100),
  },
  rssMiB: Math.round(process.memoryUsage().rss / 2 ** 20),
};
console.log(JSON.stringify(result, null, 2));
