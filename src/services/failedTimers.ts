import { type Page, type PageInput, paginate } from "../db/engine/pages.ts";
import {
  type FailedTimerRow,
  failedTimersPage,
  retryFailedTimer as retryFailedTimerRow,
} from "../db/failedTimers.ts";
import type { TxDeps } from "../deps.ts";
import { ApiError, notFound } from "../errors.ts";
import { isAnyId, ROW_ID_KEY, rowId, rowOf } from "../ids.ts";

/**
 * Work that gave up, for operators: durable timers whose handler kept failing until its retries ran out
 * are kept as `failed` with their last error (timers/runner.ts). Operators list them and put them back
 * to work once the cause is fixed.
 */

export interface FailedTimer {
  id: string;
  kind: string;
  /** The object the work was about, read from the timer's payload (a call, a campaign, a delivery …). */
  object: string | null;
  payload: Record<string, unknown>;
  status: "failed" | "pending";
  attempts: number;
  lastError: string | null;
  createdAt: string;
  failedAt: string | null;
}

/**
 * The id of what a timer works on: a webhook delivery (null once the delivery is removed), else the
 * first object id of its payload.
 */
function objectOf(key: Uint8Array, r: FailedTimerRow): string | null {
  const { payload } = r;
  if (payload.deliveryId !== undefined) {
    return r.delivery_created_at && /^[0-9]+$/.test(String(payload.deliveryId))
      ? rowId(key, "whd", String(payload.deliveryId), r.delivery_created_at)
      : null;
  }
  for (const value of Object.values(payload)) if (typeof value === "string" && isAnyId(value)) return value;
  return null;
}

const failedTimerView =
  (key: Uint8Array, status: FailedTimer["status"]) =>
  (r: FailedTimerRow): FailedTimer => ({
    id: rowId(key, "tmr", r.id, r.created_at),
    kind: r.kind,
    object: objectOf(key, r),
    payload: r.payload,
    status,
    attempts: r.attempts,
    lastError: r.last_error,
    createdAt: r.created_at.toISOString(),
    failedAt: r.failed_at?.toISOString() ?? null,
  });

/** Failed timers, newest first, in the cursor convention. */
export async function listFailedTimers(deps: TxDeps, q: PageInput): Promise<Page<FailedTimer>> {
  const key = await deps.secrets.get(ROW_ID_KEY);
  return paginate<FailedTimerRow, FailedTimer>({
    ...failedTimersPage(deps.sql, q, key),
    map: failedTimerView(key, "failed"),
  });
}

/**
 * Puts a failed timer back to work: pending, due now, its attempts counted from zero again. Its handler
 * is fenced on the state it moves, so work already done by other means changes nothing.
 */
export async function retryFailedTimer(deps: TxDeps, id: string): Promise<FailedTimer> {
  const key = await deps.secrets.get(ROW_ID_KEY);
  const n = rowOf(key, id, "tmr");
  const result = n === null ? "absent" : await retryFailedTimerRow(deps.sql, n);
  if (result === "absent") throw notFound("failed timer");
  if (result === "one_pending") {
    throw new ApiError(
      "invalid_request",
      "A timer of this kind is already pending and runs the same periodic work; this one needs no retry.",
    );
  }
  return failedTimerView(key, "pending")(result);
}
