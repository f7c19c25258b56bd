import type { SecretKeyAuth } from "../auth/access.ts";
import type { AgentRow } from "../db/agents.ts";
import { type CallView, callView, insertCall, moveCall } from "../db/calls.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import { findScheduledTask, finishTask, insertTask, listScheduledTasks, taskView } from "../db/tasks.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { HandlerContext, TimerHandler } from "../timers/types.ts";
import { callEvent, recordEvent } from "./events.ts";

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

/** A live call for later: the call in `scheduled`, its task, and the task's timer at `runAt`. */
export async function scheduleCall(
  tx: Db,
  deps: Deps,
  input: {
    organizationId: string;
    agent: Pick<AgentRow, "id" | "language">;
    to: string;
    contactId: string | null;
    variables: Record<string, unknown>;
    runAt: Date;
  },
): Promise<CallView> {
  const callId = deps.ids.next("call");
  const taskId = deps.ids.next("task");
  const now = deps.clock.now();
  const row = await insertCall(tx, {
    id: callId,
    organization_id: input.organizationId,
    livemode: true,
    status: "scheduled",
    agent_id: input.agent.id,
    to_number: input.to,
    contact_id: input.contactId,
    campaign_id: null,
    direction: "outbound",
    variables: input.variables,
    simulated_duration_seconds: null,
    language: input.agent.language,
    task_id: taskId,
    created_at: now,
  });
  const timer = await deps.timers.schedule(tx, {
    kind: TIMER_KINDS.taskRun,
    at: input.runAt,
    payload: { taskId },
  });
  await insertTask(tx, {
    id: taskId,
    organization_id: input.organizationId,
    type: "call",
    call_id: callId,
    agent_id: input.agent.id,
    to_number: input.to,
    run_at: input.runAt,
    timer_id: timer.id,
    created_at: now,
  });
  return callView(row);
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
export async function deleteTask(deps: Deps, auth: SecretKeyAuth, id: string) {
  assertLiveMode(auth);
  const notFound = () => new ApiError("not_found", "No such scheduled task.");
  if (!isId(id, "task")) throw notFound();
  const task = await findScheduledTask(deps.sql, auth.organizationId, auth.agentIds, id);
  if (!task) throw notFound();
  return pipelinedTransaction(deps.sql, async (tx) => {
    if (task.timer_id) await deps.timers.cancel(tx, task.timer_id);
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
export function runTask(deps: Deps): TimerHandler {
  return async ({ tx, timer }: HandlerContext) => {
    const task = await finishTask(tx, String(timer.payload.taskId), "completed");
    if (!task) return;
    const call = await moveCall(tx, task.call_id, "scheduled", "failed", {
      ended_at: timer.dueAt,
      successful: false,
      outcome: "carrier_unavailable",
    });
    if (!call) return;
    await recordEvent(tx, deps, callEvent("call.ended", call));
  };
}
