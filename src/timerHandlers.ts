import type { Deps } from "./deps.ts";
import { campaignSteps } from "./services/campaigns.ts";
import { checkDial, dialCalls } from "./services/dialing.ts";
import { housekeeping, refreshStatistics } from "./services/housekeeping.ts";
import { liveCallMaxDuration } from "./services/liveCalls.ts";
import { simulationSteps } from "./services/simulatedCalls.ts";
import { runTasks } from "./services/tasks.ts";
import { deliverWebhook } from "./services/webhookDelivery.ts";
import { WebhookSender } from "./services/webhookSender.ts";
import { TIMER_KINDS } from "./timers/kinds.ts";
import type { TimerRunner } from "./timers/runner.ts";

/**
 * Every timer kind (timers/kinds.ts) and its handler. `webhooks` sends the deliveries' requests; the
 * process passes its own so that shutdown can wait for them. `databaseOnly` kinds do nothing outside
 * their transaction, so the runner may send their statements before it knows it owns the rows.
 */
export function registerTimerHandlers(
  runner: TimerRunner,
  deps: Deps,
  webhooks: WebhookSender = new WebhookSender(deps),
): TimerRunner {
  return runner
    .registerBatch(TIMER_KINDS.simulationStep, simulationSteps(deps), { databaseOnly: true })
    .registerBatch(TIMER_KINDS.campaignAdvance, campaignSteps(deps), { databaseOnly: true })
    .registerBatch(TIMER_KINDS.taskRun, runTasks(deps))
    .registerBatch(TIMER_KINDS.callDial, dialCalls(deps))
    .register(TIMER_KINDS.callDialCheck, checkDial(deps))
    .register(TIMER_KINDS.liveCallMaxDuration, liveCallMaxDuration(deps))
    .register(TIMER_KINDS.webhookDelivery, deliverWebhook(deps, webhooks))
    .register(TIMER_KINDS.housekeeping, housekeeping(deps))
    .register(TIMER_KINDS.statistics, refreshStatistics(deps));
}
