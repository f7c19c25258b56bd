import { CAMPAIGN_TIMER } from "../db/campaigns.ts";
import type { Deps } from "../deps.ts";
import { createLiveKit } from "../livekit/client.ts";
import { SIMULATION_TIMER, simulationSteps, TASK_TIMER } from "../services/calls.ts";
import { campaignSteps } from "../services/campaigns.ts";
import { runTask } from "../services/tasks.ts";
import { WEB_CALL_MAX_DURATION_TIMER, webCallMaxDuration } from "../services/webCalls.ts";
import { deliverWebhook, WEBHOOK_TIMER, WebhookSender } from "../services/webhookDelivery.ts";
import type { TimerRunner } from "./runner.ts";

/**
 * Every timer kind of the service and its handler. Add a line per kind. `webhooks` sends the
 * deliveries' requests; the process passes its own so that shutdown can wait for them.
 */
export function registerTimerHandlers(
  runner: TimerRunner,
  deps: Deps,
  webhooks: WebhookSender = new WebhookSender(deps),
): TimerRunner {
  return runner
    .registerBatch(SIMULATION_TIMER, simulationSteps(deps), { databaseOnly: true })
    .registerBatch(CAMPAIGN_TIMER, campaignSteps(deps), { databaseOnly: true })
    .register(TASK_TIMER, runTask(deps))
    .register(WEB_CALL_MAX_DURATION_TIMER, webCallMaxDuration(deps, createLiveKit(deps.env)))
    .register(WEBHOOK_TIMER, deliverWebhook(deps, webhooks));
}
