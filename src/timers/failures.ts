import type { Sql } from "postgres";
import { failTimer, type HeldTimer } from "../db/timers.ts";
import type { Logger } from "../log.ts";

/**
 * Records on its row that a timer's firing failed: due again after `backoff(attempt)`, or kept failed
 * with its last error once `maxAttempts` are spent, and says so in the log. When even that cannot be
 * written, the row stays leased to the runner; once the lease ends, a poll claims and retries it.
 */
export async function recordFailure(
  sql: Sql,
  log: Logger,
  held: HeldTimer,
  err: unknown,
  opts: { runner: number; backoff: (attempt: number) => number; maxAttempts: number },
): Promise<void> {
  const message = err instanceof Error ? err.message : String(err);
  const backoffMs = opts.backoff(held.attempts + 1);
  try {
    const result = await failTimer(sql, held, {
      runner: opts.runner,
      error: message,
      backoffMs,
      maxAttempts: opts.maxAttempts,
    });
    if (!result) return;
    const fields = { timerId: held.id, kind: held.kind, attempt: result.attempts, error: message };
    if (result.status === "failed") log.error("timer failed for good; kept with its last error", fields);
    else log.warn("timer handler failed; will retry", { ...fields, retryInMs: backoffMs });
  } catch (e) {
    log.error("timer handler failed and its failure could not be recorded", {
      timerId: held.id,
      kind: held.kind,
      error: message,
      recordError: (e as Error).message,
    });
  }
}
