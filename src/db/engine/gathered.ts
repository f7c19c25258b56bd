import type { Db } from "./connection.ts";

/**
 * One statement for what the jobs of a shared transaction (sharedTransactions.ts) each send.
 *
 * The jobs of a shared transaction run side by side, each with its own statements: a callee's answer
 * or a call's end moves the call, records its event, settles its minutes, schedules or cancels its
 * timers. Each was a statement of its
 * own: a message of its own to the database (the driver sends at once whatever reaches 1 KiB, as an
 * event carrying its call object does), an executor start, and for an event the outbox's trigger. What
 * the jobs of one transaction ask for under the same `kind` goes out as one statement instead, a few
 * microtasks after the first of them asked (`JOIN_HOPS`); each caller gets its own part of the answer.
 * Anywhere else `gathered` runs the statement at once, for the caller's items alone.
 *
 * A failure of the gathered statement is every caller's, so the shared transaction rolls back and each
 * job runs again alone, where nothing is gathered.
 */

/** Items waiting for one statement, and who waits for which part of its answer. */
interface Gathering {
  items: unknown[];
  waiters: { from: number; count: number; resolve(rows: unknown[]): void; reject(err: unknown): void }[];
  run(tx: Db, items: unknown[]): Promise<readonly unknown[]>;
}

/** The transactions whose jobs gather, and what each gathers now, by kind. */
const sharing = new WeakMap<Db, Map<string, Gathering>>();

/** Makes `tx` (a transaction several jobs share, until it ends) one whose statements `gathered` joins. */
export function shareStatements(tx: Db): void {
  sharing.set(tx, new Map());
}

/**
 * `run(tx, items)`, whose answer has one entry per item, in order; in a transaction made shared by
 * `shareStatements`, together with the items the other jobs gather under `kind` meanwhile, in one
 * `run`. Resolves with this caller's entries.
 */
export function gathered<I, R>(
  tx: Db,
  kind: string,
  items: readonly I[],
  run: (tx: Db, items: I[]) => Promise<readonly R[]>,
): Promise<R[]> {
  const kinds = sharing.get(tx);
  if (!kinds || items.length === 0) return run(tx, [...items]).then((rows) => answerOf(rows, items.length));
  let g = kinds.get(kind);
  if (!g) {
    const fresh: Gathering = { items: [], waiters: [], run: run as Gathering["run"] };
    kinds.set(kind, fresh);
    afterHops(JOIN_HOPS, () => flush(tx, kinds, kind, fresh));
    g = fresh;
  }
  const into = g;
  return new Promise<R[]>((resolve, reject) => {
    into.waiters.push({
      from: into.items.length,
      count: items.length,
      resolve: resolve as (rows: unknown[]) => void,
      reject,
    });
    into.items.push(...items);
  });
}

/**
 * How many turns of the microtask queue a gathering waits for others to join it. The jobs of a shared
 * transaction are started together and resumed together (their statements answer in one message), so
 * they reach the same statement within a few turns of each other; a job further behind joins the next
 * statement. Not a turn of the event loop: under load one carries many requests' work, and the
 * transaction would hold its connection (the embedded database's only one) through each.
 */
const JOIN_HOPS = 8;

function afterHops(hops: number, fn: () => void): void {
  if (hops === 0) fn();
  else queueMicrotask(() => afterHops(hops - 1, fn));
}

function flush(tx: Db, kinds: Map<string, Gathering>, kind: string, g: Gathering): void {
  // What is gathered from now on goes in the next statement.
  if (kinds.get(kind) === g) kinds.delete(kind);
  // A throw of `run` itself is an answer too: nobody may be left waiting on a transaction's connection.
  Promise.resolve()
    .then(() => g.run(tx, g.items))
    .then((rows) => answerOf(rows, g.items.length))
    .then(
      (rows) => {
        for (const w of g.waiters) w.resolve(rows.slice(w.from, w.from + w.count));
      },
      (err) => {
        for (const w of g.waiters) w.reject(err);
      },
    );
}

/** The rows of a statement for `items` items: one each, or it is an error. */
function answerOf<R>(rows: readonly R[], items: number): R[] {
  if (rows.length !== items)
    throw new Error(`a gathered statement answered ${rows.length} rows for ${items} items`);
  return [...rows];
}
