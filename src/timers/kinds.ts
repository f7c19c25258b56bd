/**
 * Every kind of durable timer, named in one place. The names are stored in the timers table (and the
 * webhook trigger of sql/0011 writes `webhook.deliver`), so a name never changes once released. The
 * handler of each kind is registered in src/timerHandlers.ts.
 */
export const TIMER_KINDS = {
  /** The next step of a simulated call (payload `{callId, to}`). */
  simulationStep: "call.simulation",
  /** Advances a campaign (payload `{campaignId}`); scheduled when one of its calls ends. */
  campaignAdvance: "campaign.advance",
  /** A scheduled task is due (payload `{taskId}`). */
  taskRun: "task.run",
  /** Dial a live phone call placed `initiated` (payload `{callId}`): due as soon as it is placed. */
  callDial: "call.dial",
  /**
   * The safety net of a dial in flight (payload `{callId}`): if the call is still `ringing` and no
   * live process is dialling it, LiveKit's room tells what became of it.
   */
  callDialCheck: "call.dial_check",
  /** A live call reached its `maxSeconds` (payload `{callId}`). */
  liveCallMaxDuration: "webcall.max_duration",
  /** An attempt to deliver an event to a webhook endpoint (payload `{deliveryId}`). */
  webhookDelivery: "webhook.deliver",
  /** Periodic clean-up of expired rows (no payload); one pending at a time. */
  housekeeping: "housekeeping",
  /** Periodic check that the planner's statistics follow the tables' growth (no payload); one pending. */
  statistics: "statistics",
} as const;

export type TimerKind = (typeof TIMER_KINDS)[keyof typeof TIMER_KINDS];
