import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { TimerWheel } from "../../src/timers/wheel.ts";

function collect<T>(wheel: TimerWheel<T>, now: number): T[] {
  const out: T[] = [];
  wheel.advance(now, (v) => out.push(v));
  return out;
}

describe("TimerWheel", () => {
  test("fires at the deadline, never before", () => {
    const w = new TimerWheel<string>({ now: 0 });
    w.schedule(10, "a");
    expect(collect(w, 9)).toEqual([]);
    expect(collect(w, 10)).toEqual(["a"]);
    expect(w.size).toBe(0);
  });

  test("fires in deadline order across levels, insertion order within a tick", () => {
    const w = new TimerWheel<number>({ now: 0 });
    const deadlines = [70_000, 5, 300, 5, 65_536, 256, 255, 16_777_300, 1];
    deadlines.forEach((d, i) => {
      w.schedule(d, i);
    });
    const fired: [number, number][] = [];
    w.advance(20_000_000, (v) => fired.push([deadlines[v]!, v]));
    expect(fired.map(([d]) => d)).toEqual([...deadlines].sort((a, b) => a - b));
    // The two timers due at 5 fire in the order they were scheduled.
    expect(fired.filter(([d]) => d === 5).map(([, i]) => i)).toEqual([1, 3]);
  });

  test("cancel removes a timer in O(1); cancelling twice or after firing returns false", () => {
    const w = new TimerWheel<string>({ now: 0 });
    const a = w.schedule(50, "a");
    const b = w.schedule(50, "b");
    const c = w.schedule(100_000, "c");
    expect(w.cancel(b)).toBe(true);
    expect(w.cancel(b)).toBe(false);
    expect(w.cancel(c)).toBe(true);
    expect(w.size).toBe(1);
    expect(collect(w, 200_000)).toEqual(["a"]);
    expect(w.cancel(a)).toBe(false);
  });

  test("a deadline in the past fires on the next advance", () => {
    const w = new TimerWheel<string>({ now: 1000 });
    collect(w, 2000);
    w.schedule(500, "late");
    expect(collect(w, 2001)).toEqual(["late"]);
  });

  test("timers scheduled from a firing callback for the same instant fire on the next tick", () => {
    const w = new TimerWheel<string>({ now: 0 });
    w.schedule(10, "first");
    const out: string[] = [];
    w.advance(10, (v) => {
      out.push(v);
      if (v === "first") w.schedule(10, "second");
    });
    expect(out).toEqual(["first"]);
    expect(collect(w, 11)).toEqual(["second"]);
  });

  test("ticks coarser than 1 ms round deadlines up", () => {
    const w = new TimerWheel<string>({ now: 0, tickMs: 10 });
    w.schedule(11, "x");
    expect(collect(w, 19)).toEqual([]);
    expect(collect(w, 20)).toEqual(["x"]);
  });

  test("nextDeadline is exact for near timers and never later than the first deadline", () => {
    const w = new TimerWheel<string>({ now: 0 });
    expect(w.nextDeadline()).toBeNull();
    w.schedule(40, "a");
    expect(w.nextDeadline()).toBe(40);
    const far = new TimerWheel<string>({ now: 0 });
    far.schedule(100_000, "b");
    expect(far.nextDeadline()!).toBeLessThanOrEqual(100_000);
  });

  test("property: any schedule/cancel/advance sequence fires exactly the uncancelled timers, each at its deadline", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            at: fc.integer({ min: 0, max: 300_000 }),
            cancel: fc.boolean(),
            advanceBy: fc.integer({ min: 0, max: 70_000 }),
          }),
          { maxLength: 60 },
        ),
        (ops) => {
          const w = new TimerWheel<number>({ now: 0 });
          let now = 0;
          const expected = new Set<number>();
          const firedAt = new Map<number, number>();
          const deadlines = new Map<number, number>();
          const advances: number[] = [];
          ops.forEach((op, i) => {
            const t = w.schedule(now + op.at, i);
            deadlines.set(i, Math.max(now + 1, now + op.at));
            if (op.cancel) w.cancel(t);
            else expected.add(i);
            now += op.advanceBy;
            advances.push(now);
            w.advance(now, (v) => firedAt.set(v, now));
          });
          now += 400_000;
          advances.push(now);
          w.advance(now, (v) => firedAt.set(v, now));
          expect(new Set(firedAt.keys())).toEqual(expected);
          // Each fires at the first advance that reaches its deadline: never early, never skipped.
          for (const [i, at] of firedAt) expect(at).toBe(advances.find((a) => a >= deadlines.get(i)!)!);
          expect(w.size).toBe(0);
        },
      ),
      { numRuns: 300 },
    );
  });

  test("advancing one tick at a time fires each timer exactly on its tick", () => {
    const w = new TimerWheel<number>({ now: 0 });
    const deadlines = [1, 255, 256, 257, 511, 512, 65_535, 65_536, 65_537, 131_072];
    for (const d of deadlines) w.schedule(d, d);
    for (let t = 1; t <= 131_072; t++) {
      w.advance(t, (v) => expect(v).toBe(t));
    }
    expect(w.size).toBe(0);
  });
});
