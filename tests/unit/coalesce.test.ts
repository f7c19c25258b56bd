import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { BatchAnswerError, Coalescer, logRefusedBatch } from "../../src/db/engine/coalesce.ts";
import { createLogger } from "../../src/log.ts";

/** What the database answers to a statement it refuses; anything else is a lost connection or the like. */
class Refusal extends Error {}
const refusedByDatabase = (err: unknown) => err instanceof Refusal;

/** A statement that answers when the test says so, recording what it was given. */
function gatedStatements() {
  const calls: { kind: "one" | "batch"; items: string[]; release(): void; fail(err: Error): void }[] = [];
  const load = { running: 0, most: 0 };
  const statement = (kind: "one" | "batch", items: string[]) =>
    new Promise<string[]>((resolve, reject) => {
      load.running++;
      load.most = Math.max(load.most, load.running);
      calls.push({
        kind,
        items,
        release: () => {
          load.running--;
          resolve(items.map((i) => `done ${i}`));
        },
        fail: (err) => {
          load.running--;
          reject(err);
        },
      });
    });
  return {
    calls,
    load,
    runOne: (item: string) => statement("one", [item]).then((r) => r[0]!),
    runBatch: (items: string[]) => statement("batch", items),
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("Coalescer", () => {
  test("an item that finds nothing running goes at once, alone", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, { maxBatch: 10, maxInFlight: 1, refusedByDatabase });
    const answer = c.run("a");
    expect(s.calls.map((x) => [x.kind, x.items])).toEqual([["one", ["a"]]]);
    s.calls[0]!.release();
    expect(await answer).toBe("done a");
  });

  test("items that arrive while the statements run go together in the next one, each with its answer", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, { maxBatch: 10, maxInFlight: 2, refusedByDatabase });
    const answers = ["a", "b", "c", "d", "e"].map((i) => c.run(i));
    // Two statements run (the limit); c, d and e wait.
    expect(s.calls.map((x) => x.items)).toEqual([["a"], ["b"]]);
    s.calls[1]!.release();
    await tick();
    expect(s.calls.map((x) => [x.kind, x.items])).toEqual([
      ["one", ["a"]],
      ["one", ["b"]],
      ["batch", ["c", "d", "e"]],
    ]);
    s.calls[0]!.release();
    s.calls[2]!.release();
    expect(await Promise.all(answers)).toEqual(["done a", "done b", "done c", "done d", "done e"]);
    expect(s.load.most).toBe(2);
  });

  test("never more than maxInFlight statements, never more than maxBatch items in one", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, { maxBatch: 3, maxInFlight: 1, refusedByDatabase });
    const answers = Array.from({ length: 8 }, (_, i) => c.run(`i${i}`));
    for (let round = 0; round < 4; round++) {
      expect(s.calls.length).toBe(round + 1);
      s.calls[round]!.release();
      await tick();
    }
    expect(s.calls.map((x) => x.items)).toEqual([["i0"], ["i1", "i2", "i3"], ["i4", "i5", "i6"], ["i7"]]);
    expect(await Promise.all(answers)).toEqual(Array.from({ length: 8 }, (_, i) => `done i${i}`));
    expect(s.load.most).toBe(1);
  });

  test("gatherMs: items wait for the window from the first of them, then go together; a lone one goes alone after it", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, {
      maxBatch: 10,
      maxInFlight: 2,
      gatherMs: 40,
      refusedByDatabase,
    });
    const first = c.run("a");
    await Bun.sleep(10);
    const second = c.run("b");
    expect(s.calls).toHaveLength(0);
    await Bun.sleep(60);
    expect(s.calls.map((x) => [x.kind, x.items])).toEqual([["batch", ["a", "b"]]]);
    s.calls[0]!.release();
    expect(await Promise.all([first, second])).toEqual(["done a", "done b"]);
    // Idle again: the next item waits for a window of its own, then goes alone.
    const lone = c.run("c");
    await tick();
    expect(s.calls).toHaveLength(1);
    await Bun.sleep(60);
    expect(s.calls.map((x) => [x.kind, x.items])[1]).toEqual(["one", ["c"]]);
    s.calls[1]!.release();
    expect(await lone).toBe("done c");
  });

  test("gatherMs: maxBatch items waiting go at once, without the window", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, {
      maxBatch: 3,
      maxInFlight: 1,
      gatherMs: 10_000,
      refusedByDatabase,
    });
    const answers = ["a", "b", "c"].map((i) => c.run(i));
    expect(s.calls.map((x) => x.items)).toEqual([["a", "b", "c"]]);
    s.calls[0]!.release();
    expect(await Promise.all(answers)).toEqual(["done a", "done b", "done c"]);
  });

  test("gatherMs: once a window ends, what is ready fills every free slot; an item that waited that long for a slot goes at once", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, {
      maxBatch: 2,
      maxInFlight: 2,
      gatherMs: 30,
      refusedByDatabase,
    });
    const early = ["a", "b", "c"].map((i) => c.run(i));
    await Bun.sleep(50);
    // Three ready, batches of two, two slots: both go when the window ends.
    expect(s.calls.map((x) => x.items)).toEqual([["a", "b"], ["c"]]);
    // d arrives while both slots are taken, and waits for one longer than its window.
    const late = c.run("d");
    await Bun.sleep(50);
    expect(s.calls).toHaveLength(2);
    s.calls[0]!.release();
    await tick();
    expect(s.calls.map((x) => x.items)[2]).toEqual(["d"]);
    s.calls[1]!.release();
    s.calls[2]!.release();
    expect(await Promise.all([...early, late])).toEqual(["done a", "done b", "done c", "done d"]);
  });

  test("items sharing a key never share a statement, and a later one never overtakes an earlier one", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, {
      maxBatch: 10,
      maxInFlight: 1,
      refusedByDatabase,
      keys: (item: string) => [item.split(":")[0]!],
    });
    const answers = ["x:0", "a:1", "b:1", "a:2", "c:1", "a:3", "b:2"].map((i) => c.run(i));
    s.calls[0]!.release();
    await tick();
    s.calls[1]!.release();
    await tick();
    s.calls[2]!.release();
    await tick();
    s.calls[3]!.release();
    await Promise.all(answers);
    expect(s.calls.map((x) => x.items)).toEqual([["x:0"], ["a:1", "b:1", "c:1"], ["a:2", "b:2"], ["a:3"]]);
  });

  test("a failed statement of several items runs each alone: the failure stays with its own item", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, { maxBatch: 10, maxInFlight: 1, refusedByDatabase });
    const answers = ["a", "b", "c", "d"].map((i) => c.run(i).catch((err: Error) => `failed ${err.message}`));
    s.calls[0]!.release();
    await tick();
    expect(s.calls[1]!.items).toEqual(["b", "c", "d"]);
    s.calls[1]!.fail(new Refusal("deadlock detected"));
    await tick();
    expect(s.calls.slice(2).map((x) => [x.kind, x.items])).toEqual([
      ["one", ["b"]],
      ["one", ["c"]],
      ["one", ["d"]],
    ]);
    s.calls[2]!.release();
    s.calls[3]!.fail(new Error("c is wrong"));
    s.calls[4]!.release();
    expect(await Promise.all(answers)).toEqual(["done a", "done b", "failed c is wrong", "done d"]);
  });

  test("after a failed statement the queue goes on, each item with its own answer", async () => {
    let batches = 0;
    const c = new Coalescer(
      async (item: number) => {
        if (item === 2) throw new Error("two");
        return item * 10;
      },
      async (items: number[]) => {
        batches++;
        throw new Refusal(`batch of ${items.length}`);
      },
      { maxBatch: 10, maxInFlight: 1, refusedByDatabase },
    );
    const answers = await Promise.all([1, 2, 3, 4].map((i) => c.run(i).catch((e: Error) => e.message)));
    expect(answers).toEqual([10, "two", 30, 40]);
    expect(batches).toBe(1);
  });

  test("a failure that is not the database's refusal is every item's: nothing runs again", async () => {
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, { maxBatch: 10, maxInFlight: 1, refusedByDatabase });
    const answers = ["a", "b", "c"].map((i) => c.run(i).catch((err: Error) => `failed ${err.message}`));
    s.calls[0]!.release();
    await tick();
    // Lost after the commit, perhaps: running b and c again could do their work twice.
    s.calls[1]!.fail(new Error("connection closed"));
    expect(await Promise.all(answers)).toEqual([
      "done a",
      "failed connection closed",
      "failed connection closed",
    ]);
    expect(s.calls.length).toBe(2);
  });

  test("an answer without one result per item is every item's failure", async () => {
    let ones = 0;
    const c = new Coalescer(
      async (item: number) => {
        ones++;
        await Bun.sleep(1);
        return item;
      },
      async (items: number[]) => items.slice(1),
      { maxBatch: 10, maxInFlight: 1, refusedByDatabase },
    );
    const answers = await Promise.all(
      [1, 2, 3].map((i) =>
        c.run(i).catch((e: Error) => (e instanceof BatchAnswerError ? "mismatch" : e.message)),
      ),
    );
    expect(answers).toEqual([1, "mismatch", "mismatch"]);
    expect(ones).toBe(1);
  });

  test("a refused batch is logged (code and message, not its rows) before its items run again", async () => {
    const lines: string[] = [];
    const log = createLogger("debug", (line) => lines.push(line));
    const refusal = Object.assign(new Refusal("deadlock detected"), { code: "40P01" });
    const c = new Coalescer(
      async (item: string) => item,
      async (_items: string[]): Promise<string[]> => {
        throw refusal;
      },
      { maxBatch: 10, maxInFlight: 1, refusedByDatabase, onRefused: logRefusedBatch(log, "probe rows") },
    );
    const answers = await Promise.all(["first", "inf_wcs_secretsecretsecret", "third"].map((i) => c.run(i)));
    expect(answers).toEqual(["first", "inf_wcs_secretsecretsecret", "third"]);
    expect(lines.length).toBe(1);
    const entry = JSON.parse(lines[0]!);
    expect(entry).toMatchObject({
      statement: "probe rows",
      items: 2,
      code: "40P01",
      error: "deadlock detected",
    });
    expect(lines[0]).not.toContain("inf_wcs_");
  });

  test("10,000 waiting requests from one address are batched in linear work, in order, a statement at a time", async () => {
    const n = 10_000;
    const s = gatedStatements();
    const c = new Coalescer(s.runOne, s.runBatch, {
      maxBatch: 64,
      maxInFlight: 2,
      refusedByDatabase,
      // As the web-call redemptions: one key per address (all the same here) and one per token.
      keys: (item: string) => ["address 198.51.100.7", `token ${item}`],
    });
    const answers = Array.from({ length: n }, (_, i) => c.run(`t${i}`));
    // Each statement takes the one oldest request of the address; release them as they come.
    for (let released = 0; released < n; released++) {
      expect(s.calls[released]!.items).toEqual([`t${released}`]);
      s.calls[released]!.release();
      await answers[released];
    }
    expect(s.calls.length).toBe(n);
    expect(s.load.most).toBe(2);
    // Rescanning the waiting list per statement would look at n²/2 = 50,000,000 items.
    expect(c.examined).toBeLessThan(50 * n);
  });

  test("batches are those of the plain rule: the oldest items sharing no key with an earlier waiting one", async () => {
    /** The rule, spelled out: scan everything waiting, oldest first, as a reference. */
    function referenceBatches(items: { id: number; keys: string[] }[], maxBatch: number): number[][] {
      let waiting = items;
      const out: number[][] = [];
      while (waiting.length > 0) {
        const taken: number[] = [];
        const left: typeof items = [];
        const used = new Set<string>();
        for (const w of waiting) {
          if (taken.length < maxBatch && !w.keys.some((k) => used.has(k))) taken.push(w.id);
          else left.push(w);
          for (const k of w.keys) used.add(k);
        }
        out.push(taken);
        waiting = left;
      }
      return out;
    }
    const itemsArb = fc.array(fc.uniqueArray(fc.constantFrom("a", "b", "c", "d", "e"), { maxLength: 3 }), {
      minLength: 1,
      maxLength: 40,
    });
    await fc.assert(
      fc.asyncProperty(itemsArb, fc.integer({ min: 1, max: 6 }), async (keyLists, maxBatch) => {
        const s = gatedStatements();
        const c = new Coalescer(s.runOne, s.runBatch, {
          maxBatch,
          maxInFlight: 1,
          refusedByDatabase,
          keys: (item: string) => keyLists[Number(item)]!,
        });
        const answers = keyLists.map((_, i) => c.run(String(i)));
        // One statement at a time: the first item went alone; each release lets the next one form.
        for (let i = 0; i < s.calls.length; i++) {
          s.calls[i]!.release();
          await tick();
        }
        await Promise.all(answers);
        const rest = keyLists.slice(1).map((keys, i) => ({ id: i + 1, keys }));
        expect(s.calls.map((x) => x.items.map(Number))).toEqual([[0], ...referenceBatches(rest, maxBatch)]);
      }),
      { numRuns: 200 },
    );
  });

  describe("joinWhileWaiting", () => {
    /** A batch that first waits (for a connection) until the test opens it, then takes in what arrived. */
    function waitingBatches() {
      const batches: { items: string[]; open(): void; answer(): void; fail(err: Error): void }[] = [];
      const runBatch = (items: string[], more: () => string[]) =>
        new Promise<string[]>((resolve, reject) => {
          const batch = {
            items,
            open: () => {
              batch.items = [...items, ...more()];
            },
            answer: () => resolve(batch.items.map((i) => `done ${i}`)),
            fail: reject,
          };
          batches.push(batch);
        });
      const alone: string[] = [];
      const runOne = async (item: string) => {
        alone.push(item);
        return `alone ${item}`;
      };
      return { batches, runBatch, runOne, alone };
    }

    test("a lone item goes as a batch; what arrives while it waits joins it, each with its answer in order", async () => {
      const w = waitingBatches();
      const c = new Coalescer(w.runOne, w.runBatch, {
        maxBatch: 3,
        maxInFlight: 1,
        refusedByDatabase,
        joinWhileWaiting: true,
      });
      const answers = ["a", "b", "c", "d"].map((i) => c.run(i));
      expect(w.batches.map((b) => b.items)).toEqual([["a"]]);
      // Its connection came: b and c join it (at most 3), d waits for the next batch.
      w.batches[0]!.open();
      expect(w.batches[0]!.items).toEqual(["a", "b", "c"]);
      w.batches[0]!.answer();
      await tick();
      expect(w.batches.map((b) => b.items)).toEqual([["a", "b", "c"], ["d"]]);
      w.batches[1]!.open();
      w.batches[1]!.answer();
      expect(await Promise.all(answers)).toEqual(["done a", "done b", "done c", "done d"]);
      expect(w.alone).toEqual([]);
    });

    test("a refused batch runs every item again alone, those that joined it too", async () => {
      const w = waitingBatches();
      const c = new Coalescer(w.runOne, w.runBatch, {
        maxBatch: 10,
        maxInFlight: 1,
        refusedByDatabase,
        joinWhileWaiting: true,
      });
      const answers = ["a", "b"].map((i) => c.run(i));
      w.batches[0]!.open();
      w.batches[0]!.fail(new Refusal("deadlock detected"));
      expect(await Promise.all(answers)).toEqual(["alone a", "alone b"]);
    });

    test("is refused with keys: items sharing a key could join one batch", () => {
      const w = waitingBatches();
      expect(
        () =>
          new Coalescer(w.runOne, w.runBatch, {
            maxBatch: 10,
            maxInFlight: 1,
            refusedByDatabase,
            joinWhileWaiting: true,
            keys: (i) => [i],
          }),
      ).toThrow("joinWhileWaiting");
    });
  });
});
