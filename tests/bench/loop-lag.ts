/**
 * Loaded into a server process (`--preload`, by lib.ts's `startServer` when BENCH_LOOP_LAG names a
 * folder): how late its event loop runs a 2 ms interval, and whether its thread was working or waiting
 * for a core meanwhile.
 *
 * Each time the interval comes more than 5 ms late, it keeps [epoch ms, ms late, ms the thread ran,
 * ms the thread was runnable but waiting for a core] — the last two from the thread's schedstat
 * (Linux: /proc/<pid>/task/<tid>/schedstat, nanoseconds on a core and waiting on its run queue) over
 * the same interval. `<folder>/<pid>.json` holds them, rewritten every second. lib.ts's `loopLag`
 * sums them over a phase.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.env.BENCH_LOOP_LAG;
const schedstat = `/proc/self/task/${process.pid}/schedstat`;

/** [ns on a core, ns waiting for one] of the main thread so far; zeros where Linux does not say. */
function threadTimes(): [number, number] {
  try {
    const [run, wait] = readFileSync(schedstat, "utf8").split(" ").map(Number);
    return [run ?? 0, wait ?? 0];
  } catch {
    return [0, 0];
  }
}

if (dir) {
  const INTERVAL_MS = 2;
  const kept: number[][] = [];
  let last = performance.now();
  let [lastRun, lastWait] = threadTimes();
  setInterval(() => {
    const now = performance.now();
    const [run, wait] = threadTimes();
    const late = now - last - INTERVAL_MS;
    if (late > 5)
      kept.push([performance.timeOrigin + now, late, (run - lastRun) / 1e6, (wait - lastWait) / 1e6]);
    last = now;
    lastRun = run;
    lastWait = wait;
  }, INTERVAL_MS);
  const file = join(dir, `${process.pid}.json`);
  setInterval(() => writeFileSync(file, JSON.stringify(kept)), 1000);
}
