import type { SecretKeyAuth } from "../auth/secretKey.ts";
import {
  callView,
  findScheduledTask,
  finishTask,
  listScheduledTasks,
  moveCall,
  taskView,
} from "../db/calls.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import type { HandlerContext, TimerHandler } from "../timers/runner.ts";
import { schedulerOf } from "../timers/scheduler.ts";
import { recordEvent } from "./events.ts";

/** Scheduled tasks (live mode only): a live call to place at `runAt`. */

/** 403 `test_mode_not_supported` for test keys, before anything about the path id is looked at. */
export function assertLiveMode(auth: SecretKeyAuth): void {
  if (!auth.livemode) {
    throw new ApiError(
      "test_mode_not_supported",
      "Scheduled tasks have no test mode: use a live key (inf_live_…).",
    );
  }
}

export async function listTasks(deps: Pick<Deps, "sql">, auth: SecretKeyAuth) {
  assertLiveMode(auth);
  const rows = await listScheduledTasks(deps.sql, auth.organizationId, auth.agentIds);
  return { tasks: rows.map(taskView) };
}

/**
 * Deletes a scheduled task and cancels its call. The timer row is deleted first: if the task is
 * firing at this moment, that waits for it, then the task is found already run (404). Same lock
 * order as the firing (timer, then task), so the two cannot deadlock.
 */
export async function deleteTask(deps: Pick<Deps, "sql" | "timers">, auth: SecretKeyAuth, id: string) {
  assertLiveMode(auth);
  const notFound = () => new ApiError("not_found", "No such scheduled task.");
  if (!isId(id, "task")) throw notFound();
  const task = await findScheduledTask(deps.sql, auth.organizationId, auth.agentIds, id);
  if (!task) throw notFound();
  return pipelinedTransaction(deps.sql, async (transaction) => {
    const tx = transaction;
    if (task.timer_id) await schedulerOf(deps).cancel(tx, task.timer_id);
    const cancelled = await finishTask(tx, task.id, "cancelled");
    if (!cancelled) throw notFound();
    await moveCall(tx, task.call_id, "scheduled", "cancelled");
    return { id: task.id, deleted: true as const };
  });
}

/**
 * A task's time has come. Placing a live phone call needs a carrier; none is configured in this
 * service, so the call ends `failed` (and `call.ended` says so), as a live `POST /v1/calls` without
 * `runAt` would have been refused with `carrier_unavailable`.
 */
export function runTask(deps: Pick<Deps, "clock">): TimerHandler {
  return async ({ tx, timer }: HandlerContext) => {
    const task = await finishTask(tx, String(timer.payload.taskId), "completed");
    if (!task) return;
    const call = await moveCall(tx, task.call_id, "scheduled", "failed", {
      ended_at: timer.dueAt,
      successful: false,
      outcome: "carrier_unavailable",
    });
    if (!call) return;
    await recordEvent(tx, deps.clock, {
      organizationId: call.organization_id,
      type: "call.ended",
      livemode: call.livemode,
      data: callView(call),
    });
  };
}
