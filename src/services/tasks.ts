import type { SecretKeyAuth } from "../auth/access.ts";
import type { AgentRow } from "../db/agents.ts";
import { type CallView, callView, findCallById, insertCall } from "../db/calls.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import { findScheduledTask, finishTask, insertTask, listScheduledTasks, taskView } from "../db/tasks.ts";
import type { Deps } from "../deps.ts";
import { ApiError, notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { BatchTimerHandler } from "../timers/types.ts";
import { endLiveCall } from "./liveCalls.ts";
import { placeInTransaction } from "./placement.ts";

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
    agent: Pick<AgentRow, "id" | "content_language">;
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
    language: input.agent.content_language,
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
 * Deletes a scheduled task and cancels its call (`endedAt` set, `call.ended` sent, like every end of a
 * live call). The timer row is deleted first: if the task is
 * firing at this moment, that waits for it, then the task is found already run (404). Same lock
 * order as the firing (timer, then task), so the two cannot deadlock.
 */
export async function deleteTask(deps: Deps, auth: SecretKeyAuth, id: string) {
  assertLiveMode(auth);
  if (!isId(id, "task")) throw notFound("scheduled task");
  const task = await findScheduledTask(deps.sql, auth.organizationId, auth.agentIds, id);
  if (!task) throw notFound("scheduled task");
  return pipelinedTransaction(deps.sql, async (tx) => {
    if (task.timer_id) await deps.timers.cancel(tx, task.timer_id);
    const cancelled = await finishTask(tx, task.id, "cancelled");
    if (!cancelled) throw notFound("scheduled task");
    await endLiveCall(tx, deps, task.call_id, deps.clock.now(), {
      reason: "not_connected",
      status: "cancelled",
      outcome: null,
    });
    return { id: task.id, deleted: true as const };
  });
}

/**
 * Tasks whose time has come, one after the other in the firing transaction (two placements of one
 * organization in one transaction must see each other: they share its limits). Each runs every check
 * of a live phone call again, now: a refusal ends its call `failed` with the refusal's code as
 * `outcome` (and `call.ended`, through the one end of live calls); otherwise the call is placed as
 * `POST /v1/calls` places one, and dialled from its timer once this commits.
 */
export function runTasks(deps: Deps): BatchTimerHandler {
  return async ({ tx, timers }) => {
    for (const timer of timers) await runTask(tx, deps, String(timer.payload.taskId));
  };
}

async function runTask(tx: Db, deps: Deps, taskId: string): Promise<void> {
  const task = await finishTask(tx, taskId, "completed");
  if (!task) return;
  const call = await findCallById(tx, task.call_id);
  if (call?.status !== "scheduled" || !call.to_number) return;
  const [placement] = await placeInTransaction(tx, deps, [
    {
      callId: call.id,
      organizationId: call.organization_id,
      agentId: call.agent_id,
      to: call.to_number,
      // Checked again too: a contact deleted since the task was made is not called.
      contactId: call.contact_id,
      campaignId: null,
      variables: call.variables,
      scheduled: true,
    },
  ]);
  if ("call" in placement!) return;
  // A refusal writes nothing, so the transaction goes on.
  const { code } = placement!.refused;
  deps.log.info("scheduled call refused when its task fired", { callId: call.id, code });
  await endLiveCall(tx, deps, call.id, deps.clock.now(), {
    reason: "not_connected",
    status: "failed",
    outcome: code,
  });
}
