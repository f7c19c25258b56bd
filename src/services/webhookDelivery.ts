import { Buffer } from "node:buffer";
import { createHmac } from "node:crypto";
import { endUncountedDelivery, readHandoffState } from "../db/webhookDeliveries.ts";
import type { Deps } from "../deps.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { HandlerContext, TimerHandler } from "../timers/types.ts";

/**
 * Delivering events to webhook endpoints: the event's JSON, signed per Standard Webhooks, POSTed to
 * every endpoint that receives it (sql/0020 says which). At least once: a failure (an answer other
 * than 2xx, or none within 15 s, the address lookup included) is retried 5 s, 5 min, 30 min, 2 h, 5 h,
 * 10 h and 10 h after it, on the real clock; after the 8th attempt the delivery is given up.
 *
 * Fair and bounded: each organization has its own queue in memory (at most `queuePerOrganization`
 * deliveries, counting those promised a place by a handler whose transaction has not committed yet)
 * and its own request slots (at most `perOrganization` at once; its first always from sockets kept for
 * organizations with nothing in flight, the others from a shared pool: webhookSender.ts tells the
 * bounds). So one organization's slow or dead receivers occupy its own slots and queue only: another
 * organization's deliveries never wait behind them, and never fail for them. An attempt is counted when
 * its request starts, never while it waits.
 *
 * How a delivery moves, each step durable:
 * - a trigger (sql/0011, sql/0020) writes the delivery and the timer of its first attempt with the event;
 * - the timer's handler hands the delivery to this process's sender if its organization's queue has
 *   room, with a timer that holds it meanwhile (it fires if the process stops; if it fires while the
 *   delivery still waits here, it is written again); when the queue is full the delivery waits in the
 *   timers table instead, marked as waiting for its organization, until the queue is half empty: then
 *   the sender brings the oldest waiting ones forward, as many as there is room for (and a distant
 *   due time brings them back anyway) — nothing is counted;
 * - when a slot frees, one statement counts the attempt (fenced on the attempts so far: one process
 *   starts it) and swaps the holding timer for one that stands in for the attempt's outcome;
 * - the outcome is recorded (fenced on the attempt number) with the next attempt's timer, or none.
 * A process that stops mid-way leaves a timer that picks the delivery up again: a receiver may see an
 * event twice, never zero times.
 */

/** Delays after the 1st … 7th failure; after the 8th attempt fails the delivery is given up. */
export const RETRY_DELAYS_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
export const ATTEMPT_TIMEOUT_MS = 15_000;

export interface WebhookEvent {
  id: string;
  type: string;
  livemode: boolean;
  createdAt: string;
  data: unknown;
}

/** Standard Webhooks: HMAC-SHA256 of `id.timestamp.body` under the secret's base64 bytes. */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64")}`;
}

/**
 * The `webhook-signature` header: the signature under the endpoint's secret and, for a day after each
 * rotation, one under each secret it replaced, space-separated (Standard Webhooks).
 */
export function signatureHeader(
  secrets: { secret: string; previousSecrets: readonly string[] },
  id: string,
  timestamp: number,
  body: string,
): string {
  return [secrets.secret, ...secrets.previousSecrets]
    .map((s) => signWebhook(s, id, timestamp, body))
    .join(" ");
}

/**
 * What the delivery timer's handler needs of the process's sender (services/webhookSender.ts): a place
 * in an organization's queue, and how long a delivery is held or waits meanwhile.
 */
export interface DeliveryQueue {
  /** Promises a place in the organization's queue to the delivery, or says the queue is full. */
  accepts(organizationId: string, deliveryId: number): boolean;
  enqueue(d: QueuedDelivery): void;
  /** Deliveries of the organization were told to wait in the table for room. */
  noteWaiting(organizationId: string): void;
  /** How long a delivery handed over is held before its timer looks at it again. */
  readonly holdMs: number;
  /** How long a delivery told to wait is left in the table at most. */
  readonly waitingMs: number;
  /** How long an attempt under way may take, its outcome's write included. */
  readonly inFlightMs: number;
}

/** A delivery waiting in this process for a request slot. Nothing is counted yet. */
export interface QueuedDelivery {
  deliveryId: number;
  organizationId: string;
  /** The attempt it will make (attempts so far + 1). */
  attempt: number;
  /** The timer that holds it while it waits. */
  heldBy: string;
}

/**
 * The handler of `webhook.deliver` timers: decides what comes next for a delivery, counting nothing.
 * Hands it to the sender when its organization's queue has room (with a timer that holds it), defers
 * it when the queue is full, waits for an attempt under way, ends it when it cannot be attempted.
 */
export function deliverWebhook(deps: Pick<Deps, "log">, sender: DeliveryQueue): TimerHandler {
  return async ({ tx, timer, schedule, afterCommit }: HandlerContext) => {
    const deliveryId = Number(timer.payload.deliveryId);
    const d = await readHandoffState(tx, deliveryId, sender.inFlightMs);
    if (d?.status !== "pending") return;
    if (!d.endpoint_ready || d.attempts >= MAX_ATTEMPTS) {
      // Its endpoint was deleted or disabled (dropped), or its last attempt's outcome was lost (failed).
      await endUncountedDelivery(tx, deliveryId);
      return;
    }
    const again = (delayMs: number) =>
      schedule({ kind: TIMER_KINDS.webhookDelivery, delayMs, payload: { deliveryId } });
    if (d.in_flight_ms > 0) {
      // An attempt is under way (here or in another process): look again once its outcome is due.
      await again(d.in_flight_ms);
      return;
    }
    if (!sender.accepts(d.organization_id, deliveryId)) {
      // Waits in the table for room in its organization's queue; the sender brings it forward.
      await schedule({
        kind: TIMER_KINDS.webhookDelivery,
        delayMs: sender.waitingMs,
        payload: { deliveryId, waitingFor: d.organization_id },
      });
      afterCommit(() => sender.noteWaiting(d.organization_id));
      deps.log.debug("webhook delivery waits for room in its organization's queue", { deliveryId });
      return;
    }
    const holder = await again(sender.holdMs);
    afterCommit(() =>
      sender.enqueue({
        deliveryId,
        organizationId: d.organization_id,
        attempt: d.attempts + 1,
        heldBy: holder.id,
      }),
    );
  };
}
