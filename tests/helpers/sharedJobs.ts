import type { Sql } from "postgres";
import type { Db } from "../../src/db/engine/connection.ts";
import { SharedTransactions } from "../../src/db/engine/sharedTransactions.ts";
import { silentLogger } from "../../src/log.ts";

/**
 * `jobs` in one shared transaction (db/engine/sharedTransactions.ts): started while another job holds
 * the only slot, so that they wait and go out together once it is done; each one's outcome.
 */
export async function inOneSharedTransaction<T>(
  sql: Sql,
  jobs: ((tx: Db) => Promise<T>)[],
): Promise<PromiseSettledResult<T>[]> {
  const shared = new SharedTransactions(sql, silentLogger, { maxBatch: 64, maxInFlight: 1 });
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const first = shared.run(["first"], () => gate);
  await Bun.sleep(20);
  const started = jobs.map((job, i) => shared.run([`job${i}`], job));
  open();
  await first;
  return Promise.allSettled(started);
}

/** The values of outcomes that must all be fulfilled (the first failure is thrown). */
export function fulfilled<T>(settled: PromiseSettledResult<T>[]): T[] {
  return settled.map((s) => {
    if (s.status === "rejected") throw s.reason;
    return s.value;
  });
}
