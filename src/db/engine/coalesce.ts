import type { Logger } from "../../log.ts";

/**
 * Many concurrent requests for the same statement as few statements of many rows.
 *
 * A statement of one row costs the database about as much as one of ten: parsing the message,
 * starting the executor, a commit and its WAL flush, a round trip, and as much again in the driver.
 * Under load those fixed costs were most of a web call's database time (BENCHMARKS.md). A coalescer
 * keeps at most `maxInFlight` statements of its kind running; what arrives meanwhile waits and goes
 * out together in the next one. An idle server therefore sends each item at once, alone (`runOne`),
 * and a busy one sends batches (`runBatch`) whose size follows the load, with no timer to tune.
 * A batch statement takes its rows from `batch_rows` (sql/0012), which keeps its plan right as the
 * tables grow.
 *
 * A batch is one statement, so it commits or fails as a whole. When the database refused it (an error
 * of the statement, after which nothing of it is left), each of its items runs again alone: a failure
 * that belongs to one item (or a deadlock between two batches) stays that item's, and every item gets
 * the answer it would have had on its own. Any other failure (the connection lost, perhaps after the
 * commit; an answer that does not fit) is every item's: running them again could do twice what may
 * have been done once.
 */

export interface CoalesceOptions<I> {
  /** Most items in one statement. */
  maxBatch: number;
  /** Statements of this coalescer running at once. */
  maxInFlight: number;
  /**
   * Items that share a key never go in the same statement: the later one waits for a later statement
   * (which may run while the first one does; row locks order them then). For statements that would
   * touch the same row twice (an upsert cannot) or whose items would otherwise not see each other's
   * effects (the second redeemer of a token must find it spent).
   */
  keys?: (item: I) => readonly string[];
  /** Whether the failure of a batch left nothing behind, so that its items may run again alone. */
  refusedByDatabase: (err: unknown) => boolean;
  /** Told of each refused batch before its items run again alone (a refusal every time would double the work unseen). */
  onRefused?: (err: unknown, items: number) => void;
}

/**
 * The settings of the request paths' coalescers. Two statements in flight per kind gave as many pairs
 * per second as three and a lower p99; batches of at most 16 gave a quarter fewer (BENCHMARKS.md).
 */
export const STATEMENT_COALESCING = { maxBatch: 64, maxInFlight: 2 } as const;

/** A log line for a refused batch: the database's code and message, never the rows (they hold hashes). */
export function logRefusedBatch(log: Logger, statement: string): (err: unknown, items: number) => void {
  return (err, items) =>
    log.warn("a batched statement was refused; its items run again one by one", {
      statement,
      items,
      code: (err as { code?: unknown }).code,
      error: err instanceof Error ? err.message : String(err),
    });
}

/** An answer of a batch that does not have one result per item. */
export class BatchAnswerError extends Error {}

/**
 * `make(owner)`, made once per owner (a database handle, the app's dependencies) and kept as long as
 * the owner lives: one coalescer per database, so every request of a process shares it.
 */
export function onePer<K extends object, V>(make: (owner: K) => V): (owner: K) => V {
  const made = new WeakMap<K, V>();
  return (owner) => {
    let value = made.get(owner);
    if (value === undefined) {
      value = make(owner);
      made.set(owner, value);
    }
    return value;
  };
}

interface Waiting<I, O> {
  item: I;
  keys: readonly string[];
  resolve(value: O): void;
  reject(reason: unknown): void;
}

export class Coalescer<I, O> {
  readonly #runOne: (item: I) => Promise<O>;
  readonly #runBatch: (items: I[]) => Promise<O[]>;
  readonly #options: CoalesceOptions<I>;
  #waiting: Waiting<I, O>[] = [];
  #inFlight = 0;

  /**
   * `runBatch` answers for every item, in order. `runOne` is what a single item runs: alone when
   * nothing else waits, and each item of a failed batch.
   */
  constructor(
    runOne: (item: I) => Promise<O>,
    runBatch: (items: I[]) => Promise<O[]>,
    options: CoalesceOptions<I>,
  ) {
    this.#runOne = runOne;
    this.#runBatch = runBatch;
    this.#options = options;
  }

  run(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#waiting.push({ item, keys: this.#options.keys?.(item) ?? [], resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#options.maxInFlight && this.#waiting.length > 0) {
      const batch = this.#take();
      this.#inFlight++;
      void this.#send(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  /** The oldest waiting items that fit in one statement, in arrival order; the others keep waiting. */
  #take(): Waiting<I, O>[] {
    const { maxBatch, keys } = this.#options;
    if (!keys || this.#waiting.length <= 1) return this.#waiting.splice(0, maxBatch);
    const taken: Waiting<I, O>[] = [];
    const left: Waiting<I, O>[] = [];
    const used = new Set<string>();
    for (const w of this.#waiting) {
      const itemKeys = w.keys;
      if (taken.length < maxBatch && !itemKeys.some((k) => used.has(k))) {
        taken.push(w);
        for (const k of itemKeys) used.add(k);
      } else {
        left.push(w);
        // An item left behind holds its keys too: a later item with the same key must not overtake it.
        for (const k of itemKeys) used.add(k);
      }
    }
    this.#waiting = left;
    return taken;
  }

  async #send(batch: Waiting<I, O>[]): Promise<void> {
    if (batch.length > 1) {
      try {
        const results = await this.#runBatch(batch.map((w) => w.item));
        if (results.length !== batch.length) {
          throw new BatchAnswerError(`${results.length} answers for ${batch.length} items`);
        }
        for (const [i, w] of batch.entries()) w.resolve(results[i]!);
        return;
      } catch (err) {
        if (!this.#options.refusedByDatabase(err)) {
          for (const w of batch) w.reject(err);
          return;
        }
        this.#options.onRefused?.(err, batch.length);
        // The statement left nothing behind: each item runs again alone, below.
      }
    }
    await Promise.all(
      batch.map(async (w) => {
        try {
          w.resolve(await this.#runOne(w.item));
        } catch (err) {
          w.reject(err);
        }
      }),
    );
  }
}
