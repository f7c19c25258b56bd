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
  /**
   * For a batch that waits before its statements can go (for a pooled connection): every item goes
   * through `runBatch`, a lone one too, and `runBatch` may call `more()` once it can go, to take in
   * the items that arrived while it waited, rather than leave them for the next batch. Not with `keys`.
   */
  joinWhileWaiting?: boolean;
  /**
   * Milliseconds a statement waits, from the arrival of its oldest item, for others to join it before
   * it goes (unless `maxBatch` are already waiting). None by default: for work nobody waits on by the millisecond
   * (what LiveKit and the callee report), where one transaction for several items instead of one each
   * leaves more of the machine to the requests that are waited on (BENCHMARKS.md, "a gathering window").
   */
  gatherMs?: number;
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

interface Waiting<I, O> {
  item: I;
  /** Its keys, each once. */
  keys: readonly string[];
  /** Arrival order, and time (`performance.now()`, for `gatherMs`). */
  seq: number;
  arrivedAt: number;
  /** How many of its keys an earlier waiting item holds: it may go out when none does. */
  blockers: number;
  resolve(value: O): void;
  reject(reason: unknown): void;
}

export class Coalescer<I, O> {
  readonly #runOne: (item: I) => Promise<O>;
  readonly #runBatch: (items: I[], more: () => I[]) => Promise<O[]>;
  readonly #options: CoalesceOptions<I>;
  /**
   * The waiting items free to go (no earlier waiting item shares a key), oldest first; the others wait
   * in the queue of each key they share, and become free when the items before them leave. Forming a
   * statement therefore costs what it takes, never a scan of everything waiting: a flood from one
   * address is a long queue that each statement takes one item from.
   */
  readonly #ready = new MinHeap<Waiting<I, O>>(
    (a, b) => a.seq < b.seq,
    () => this.#examined++,
  );
  readonly #byKey = new Map<string, Queue<Waiting<I, O>>>();
  #arrivals = 0;
  #inFlight = 0;
  #examined = 0;
  /** The gathering window under way (`gatherMs`), and whether it has just ended (its items go now). */
  #gathering: ReturnType<typeof setTimeout> | null = null;
  #gathered = false;

  /**
   * `runBatch` answers for every item, in order (those `more()` gave it after the others). `runOne` is
   * what a single item runs: alone when nothing else waits, and each item of a failed batch.
   */
  constructor(
    runOne: (item: I) => Promise<O>,
    runBatch: (items: I[], more: () => I[]) => Promise<O[]>,
    options: CoalesceOptions<I>,
  ) {
    if (options.joinWhileWaiting && options.keys) throw new Error("joinWhileWaiting does not go with keys");
    this.#runOne = runOne;
    this.#runBatch = runBatch;
    this.#options = options;
  }

  /** Steps spent deciding what goes in which statement (items queued, freed, taken; heap moves). */
  get examined(): number {
    return this.#examined;
  }

  run(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      const keys = [...new Set(this.#options.keys?.(item) ?? [])];
      const w: Waiting<I, O> = {
        item,
        keys,
        seq: this.#arrivals++,
        arrivedAt: performance.now(),
        blockers: 0,
        resolve,
        reject,
      };
      for (const k of keys) {
        this.#examined++;
        let queue = this.#byKey.get(k);
        if (!queue) {
          queue = new Queue();
          this.#byKey.set(k, queue);
        }
        if (queue.size > 0) w.blockers++;
        queue.push(w);
      }
      if (w.blockers === 0) this.#ready.push(w);
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#options.maxInFlight && this.#ready.size > 0) {
      if (this.#gatherFirst()) return;
      const batch = this.#take();
      this.#inFlight++;
      void this.#send(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  /**
   * Whether the items ready wait for their gathering window (`gatherMs`) to end before they go. The
   * window runs from the arrival of the oldest of them, so an item that has waited that long for a
   * free slot goes as soon as one is free; once it ends, everything ready goes, as many statements as
   * there are free slots.
   */
  #gatherFirst(): boolean {
    const ms = this.#options.gatherMs ?? 0;
    if (ms <= 0 || this.#gathered || this.#ready.size >= this.#options.maxBatch) return false;
    const left = this.#ready.peek()!.arrivedAt + ms - performance.now();
    if (left <= 0) return false;
    this.#gathering ??= setTimeout(() => {
      this.#gathering = null;
      this.#gathered = true;
      try {
        this.#pump();
      } finally {
        this.#gathered = false;
      }
    }, left);
    return true;
  }

  /**
   * The oldest free items, at most `maxBatch`, in arrival order. The items they held back become free
   * for the next statement only: two items sharing a key never go in the same one.
   */
  #take(room = this.#options.maxBatch): Waiting<I, O>[] {
    const taken: Waiting<I, O>[] = [];
    while (taken.length < room && this.#ready.size > 0) {
      this.#examined++;
      taken.push(this.#ready.pop()!);
    }
    for (const w of taken) {
      for (const k of w.keys) {
        this.#examined++;
        const queue = this.#byKey.get(k)!;
        queue.shift();
        const next = queue.peek();
        if (next === undefined) this.#byKey.delete(k);
        else if (--next.blockers === 0) this.#ready.push(next);
      }
    }
    return taken;
  }

  async #send(batch: Waiting<I, O>[]): Promise<void> {
    if (batch.length > 1 || this.#options.joinWhileWaiting) {
      const more = () => {
        const joined = this.#take(this.#options.maxBatch - batch.length);
        batch.push(...joined);
        return joined.map((w) => w.item);
      };
      try {
        const results = await this.#runBatch(
          batch.map((w) => w.item),
          this.#options.joinWhileWaiting ? more : () => [],
        );
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

/** First in, first out, in constant time per item (an array's shift moves every item after it). */
class Queue<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get size(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  peek(): T | undefined {
    return this.#items[this.#head];
  }

  shift(): T | undefined {
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    // Drop the consumed front once it is half the array: each item is moved at most once more.
    if (this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }
}

/** A binary heap: the least item first, in logarithmic time per push and pop. */
class MinHeap<T> {
  readonly #items: T[] = [];
  readonly #less: (a: T, b: T) => boolean;
  readonly #step: () => void;

  /** `step` is told of each move, for the coalescer's count of its work. */
  constructor(less: (a: T, b: T) => boolean, step: () => void) {
    this.#less = less;
    this.#step = step;
  }

  get size(): number {
    return this.#items.length;
  }

  /** The least item, left in place. */
  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    const a = this.#items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(a[i]!, a[parent]!)) break;
      this.#step();
      [a[i], a[parent]] = [a[parent]!, a[i]!];
      i = parent;
    }
  }

  pop(): T | undefined {
    const a = this.#items;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || last === undefined) return top;
    a[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let least = i;
      if (l < a.length && this.#less(a[l]!, a[least]!)) least = l;
      if (r < a.length && this.#less(a[r]!, a[least]!)) least = r;
      if (least === i) return top;
      this.#step();
      [a[i], a[least]] = [a[least]!, a[i]!];
      i = least;
    }
  }
}
