import { createHmac } from "node:crypto";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import { type InsertedTimerRow, makeTimersDue } from "../db/timers.ts";
import {
  endUncountedDelivery,
  lockDeliveryState,
  readHandoffState,
  recordDeliveryOutcome,
  type StartedAttempt,
  startAttempt,
} from "../db/webhookDeliveries.ts";
import type { Deps } from "../deps.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { HandlerContext, TimerHandler } from "../timers/types.ts";
import { postWebhook, type Resolve, resolveWithDns, type WebhookAnswer } from "./webhookRequest.ts";
import { isPrivateAddress, webhookUrlProblem } from "./webhookUrls.ts";

/**
 * Delivering events to webhook endpoints: the event's JSON, signed per Standard Webhooks, POSTed to
 * every endpoint that receives it (sql/0015 says which). At least once: a failure (an answer other
 * than 2xx, or none within 15 s, the address lookup included) is retried 5 s, 5 min, 30 min, 2 h, 5 h,
 * 10 h and 10 h after it, on the real clock; after the 8th attempt the delivery is given up.
 *
 * Fair and bounded: each organization has its own queue in memory (at most `queuePerOrganization`
 * deliveries) and its own request slots (at most `perOrganization` at once, out of `concurrency`), and
 * the slots go round the organizations in turn. So one organization's slow or dead receivers occupy
 * its own slots and queue only: another organization's deliveries never wait behind them, and never
 * fail for them. An attempt is counted when its request starts, never while it waits.
 *
 * How a delivery moves, each step durable:
 * - a trigger (sql/0011, sql/0015) writes the delivery and the timer of its first attempt with the event;
 * - the timer's handler hands the delivery to this process's sender if its organization's queue has
 *   room, with a timer that holds it meanwhile (it fires if the process stops); when the queue is full
 *   it writes the timer again for when the queue should have room — nothing is counted;
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
/** Beyond an attempt's own bound, how long its outcome may take to be written before it is taken as lost. */
const SAFETY_MARGIN_MS = 30_000;

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
 * The `webhook-signature` header: the signature under the endpoint's secret and, for a day after a
 * rotation, the one under its previous secret too, space-separated (Standard Webhooks).
 */
export function signatureHeader(
  secrets: { secret: string; previousSecret: string | null },
  id: string,
  timestamp: number,
  body: string,
): string {
  const current = signWebhook(secrets.secret, id, timestamp, body);
  return secrets.previousSecret
    ? `${current} ${signWebhook(secrets.previousSecret, id, timestamp, body)}`
    : current;
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

/** A started attempt, as its outcome is recorded. */
export interface Attempt {
  deliveryId: number;
  attempt: number;
  endpointId: string;
  eventId: string;
  /** The timer standing in for this attempt's outcome. */
  netId: string;
}

type Outcome =
  | { ok: true; status: number; durationMs: number }
  | {
      ok: false;
      status: number | null;
      error: string;
      durationMs: number;
    };

export interface SenderOptions {
  timeoutMs?: number;
  /** Requests in flight at once, all organizations together. */
  concurrency?: number;
  /** Requests in flight at once for one organization. */
  perOrganization?: number;
  /** Deliveries of one organization waiting in memory at most. */
  queuePerOrganization?: number;
  resolve?: Resolve;
}

interface Organization {
  queue: QueuedDelivery[];
  running: number;
  /** Recent attempt durations of its receivers (moving average), to tell when its queue will have room. */
  averageMs: number;
}

/** Sends attempts outside any transaction, fairly between organizations, and records their outcomes. */
export class WebhookSender {
  readonly #deps: Deps;
  readonly #timeoutMs: number;
  readonly #concurrency: number;
  readonly #perOrganization: number;
  readonly #queuePerOrganization: number;
  readonly #resolve: Resolve;
  readonly #organizations = new Map<string, Organization>();
  /** Organizations with waiting deliveries, in the order their turn comes. */
  readonly #turns: string[] = [];
  /** Deliveries this process holds (waiting or under way), by id. */
  readonly #held = new Map<number, QueuedDelivery>();
  readonly #running = new Set<Promise<void>>();

  constructor(deps: Deps, opts: SenderOptions = {}) {
    this.#deps = deps;
    this.#timeoutMs = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.#concurrency = opts.concurrency ?? 32;
    this.#perOrganization = Math.min(opts.perOrganization ?? 4, this.#concurrency);
    this.#queuePerOrganization = opts.queuePerOrganization ?? 64;
    this.#resolve = opts.resolve ?? resolveWithDns;
  }

  /**
   * How long a delivery handed over may wait here before its holding timer fires: a full queue's turn
   * at the slowest (every attempt before it running to the timeout), then its own attempt.
   */
  get holdMs(): number {
    const rounds = Math.ceil(this.#queuePerOrganization / this.#perOrganization) + 1;
    return rounds * this.#timeoutMs + SAFETY_MARGIN_MS;
  }

  /** The longest an attempt's outcome may take to be written: past it, the attempt is taken as lost. */
  get inFlightMs(): number {
    return this.#timeoutMs + SAFETY_MARGIN_MS;
  }

  /** Whether the organization's queue has room for one more delivery (or already holds this one). */
  accepts(organizationId: string, deliveryId: number): boolean {
    if (this.#held.has(deliveryId)) return true;
    return (this.#organizations.get(organizationId)?.queue.length ?? 0) < this.#queuePerOrganization;
  }

  /**
   * When to look at a delivery again that found its organization's queue full: about when the queue
   * should have room, from how long that organization's receivers have been taking, spread a little so
   * that deferred deliveries do not come back together.
   */
  deferMs(organizationId: string): number {
    const org = this.#organizations.get(organizationId);
    const waiting = org ? org.queue.length / this.#perOrganization : 0;
    const estimate = waiting * (org?.averageMs ?? this.#timeoutMs);
    return Math.round(Math.min(this.holdMs, Math.max(1_000, estimate)) * (1 + Math.random() * 0.5));
  }

  /** Takes a delivery to send (after the handing transaction committed). */
  enqueue(d: QueuedDelivery): void {
    const held = this.#held.get(d.deliveryId);
    if (held) {
      // Its holding timer fired while it waited here, and a new one holds it now.
      held.heldBy = d.heldBy;
      return;
    }
    let org = this.#organizations.get(d.organizationId);
    if (!org) {
      org = { queue: [], running: 0, averageMs: this.#timeoutMs / 2 };
      this.#organizations.set(d.organizationId, org);
    }
    if (org.queue.length >= this.#queuePerOrganization) {
      // Memory stays bounded; the holding timer brings it back later. Nothing was counted.
      this.#deps.log.debug("webhook queue of the organization full; the delivery waits for its timer", {
        deliveryId: d.deliveryId,
        organizationId: d.organizationId,
      });
      return;
    }
    org.queue.push(d);
    this.#held.set(d.deliveryId, d);
    if (org.queue.length === 1) this.#turns.push(d.organizationId);
    this.#pump();
  }

  /** Resolves when every delivery handed over so far has been sent and recorded (or dropped by `drain`). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  /**
   * For shutdown: hands the waiting deliveries back (nothing was counted; their holding timers are made
   * due at once, for another process or the next start) and waits at most `ms` for the requests under
   * way. True when nothing was left running.
   */
  async drain(ms: number): Promise<boolean> {
    const waiting: string[] = [];
    for (const org of this.#organizations.values()) {
      for (const d of org.queue) {
        this.#held.delete(d.deliveryId);
        waiting.push(d.heldBy);
      }
      org.queue.length = 0;
    }
    this.#turns.length = 0;
    await makeTimersDue(this.#deps.sql, waiting).catch((err) =>
      // Their timers still fire when they were due to.
      this.#deps.log.warn("webhook deliveries not handed back at shutdown", {
        error: (err as Error).message,
      }),
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    const done = await Promise.race([
      this.idle().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      }),
    ]);
    clearTimeout(timer);
    return done;
  }

  /** Starts requests while slots are free, one organization after another. */
  #pump(): void {
    let skipped = 0;
    while (this.#running.size < this.#concurrency && this.#turns.length > skipped) {
      const orgId = this.#turns.shift()!;
      const org = this.#organizations.get(orgId)!;
      if (org.running >= this.#perOrganization) {
        // Its slots are busy: its turn waits at the back; the others go first.
        this.#turns.push(orgId);
        skipped++;
        continue;
      }
      skipped = 0;
      const d = org.queue.shift()!;
      if (org.queue.length > 0) this.#turns.push(orgId);
      org.running++;
      const run = this.#attempt(org, d)
        .catch((err) =>
          // Its timers still bring it back.
          this.#deps.log.error("webhook delivery attempt not recorded", {
            deliveryId: d.deliveryId,
            error: (err as Error).message,
          }),
        )
        .finally(() => {
          org.running--;
          this.#held.delete(d.deliveryId);
          this.#running.delete(run);
          if (org.running === 0 && org.queue.length === 0) this.#organizations.delete(d.organizationId);
          this.#pump();
        });
      this.#running.add(run);
    }
  }

  async #attempt(org: Organization, d: QueuedDelivery): Promise<void> {
    const deps = this.#deps;
    const started = await startAttempt(
      deps.sql,
      { id: d.deliveryId, attempt: d.attempt, heldBy: d.heldBy, outcomeWithinMs: this.inFlightMs },
      (rows) => deps.timers.insertFrom(deps.sql, rows),
    );
    // Started elsewhere, finished meanwhile, or its endpoint went: its own timer takes it from here.
    if (!started) return;
    deps.timers.scheduled([started.net as InsertedTimerRow]);
    const outcome = await this.#send(started);
    org.averageMs = org.averageMs * 0.8 + outcome.durationMs * 0.2;
    await recordOutcome(
      deps,
      {
        deliveryId: d.deliveryId,
        attempt: started.attempts,
        endpointId: started.endpoint_id,
        eventId: started.event_id,
        netId: started.net.id,
      },
      outcome,
    );
  }

  async #send(a: StartedAttempt): Promise<Outcome> {
    const begun = performance.now();
    const answer = await this.#request(a);
    const durationMs = Math.round(performance.now() - begun);
    if ("error" in answer) return { ok: false, status: null, error: answer.error, durationMs };
    if (answer.status >= 200 && answer.status < 300) return { ok: true, status: answer.status, durationMs };
    return { ok: false, status: answer.status, error: `answered ${answer.status}`, durationMs };
  }

  #request(a: StartedAttempt): Promise<WebhookAnswer> {
    const allowPrivate = this.#deps.env.WEBHOOK_ALLOW_PRIVATE_URLS;
    const problem = webhookUrlProblem(a.url, allowPrivate);
    if (problem) return Promise.resolve({ error: `url ${problem}` });
    const event: WebhookEvent = {
      id: a.event_id,
      type: a.type,
      livemode: a.livemode,
      createdAt: a.created_at.toISOString(),
      data: a.data,
    };
    const body = JSON.stringify(event);
    const timestamp = Math.floor(this.#deps.clock.now().getTime() / 1000);
    return postWebhook({
      url: a.url,
      headers: {
        "content-type": "application/json",
        "user-agent": "voice-service-webhooks/1",
        "webhook-id": event.id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signatureHeader(
          { secret: a.secret, previousSecret: a.previous_secret },
          event.id,
          timestamp,
          body,
        ),
      },
      body,
      timeoutMs: this.#timeoutMs,
      resolve: this.#resolve,
      // The URL was judged as text; the addresses its name resolves to are judged here, and the
      // connection goes to one of those.
      refuse: (address) =>
        !allowPrivate && isPrivateAddress(address)
          ? "url resolves to a loopback, private or reserved address"
          : null,
    });
  }
}

/**
 * Writes an attempt's outcome, unless a later attempt already took over (the attempt number fences
 * it), and replaces the attempt's timer with what comes next: nothing after a success or the last
 * failure, the scheduled retry otherwise.
 */
export async function recordOutcome(deps: Deps, a: Attempt, outcome: Outcome): Promise<void> {
  const scheduler = deps.timers;
  const finished = outcome.ok || a.attempt >= MAX_ATTEMPTS;
  const status = outcome.ok ? "delivered" : finished ? "failed" : "pending";
  await pipelinedTransaction(deps.sql, async (tx) => {
    // Locks in the order a firing timer takes them (its timer row, then the delivery row), so the two
    // never wait on each other. If this attempt is stale, its timer has fired already: a no-op.
    await scheduler.cancel(tx, a.netId);
    // Locked and read before writing: an update fenced on `attempts` would judge a row changed by a
    // transaction still running by its older version; the lock waits for that transaction instead.
    const current = await lockDeliveryState(tx, a.deliveryId);
    if (current?.attempts !== a.attempt || current.status !== "pending") return;
    await recordDeliveryOutcome(tx, a.deliveryId, {
      status,
      lastStatus: outcome.status,
      lastError: outcome.ok ? null : outcome.error,
      durationMs: outcome.durationMs,
      finishedAt: finished ? deps.clock.now() : null,
    });
    if (!finished) {
      await scheduler.schedule(tx, {
        kind: TIMER_KINDS.webhookDelivery,
        delayMs: RETRY_DELAYS_MS[a.attempt - 1]!,
        payload: { deliveryId: a.deliveryId },
      });
    }
  });
  if (!outcome.ok) {
    deps.log.warn("webhook delivery failed", {
      deliveryId: a.deliveryId,
      endpointId: a.endpointId,
      eventId: a.eventId,
      attempt: a.attempt,
      error: outcome.error,
      ...(finished ? { givenUp: true } : { retryInMs: RETRY_DELAYS_MS[a.attempt - 1] }),
    });
  }
}

/**
 * The handler of `webhook.deliver` timers: decides what comes next for a delivery, counting nothing.
 * Hands it to the sender when its organization's queue has room (with a timer that holds it), defers
 * it when the queue is full, waits for an attempt under way, ends it when it cannot be attempted.
 */
export function deliverWebhook(deps: Pick<Deps, "log">, sender: WebhookSender): TimerHandler {
  return async ({ tx, timer, schedule, afterCommit }: HandlerContext) => {
    const deliveryId = Number(timer.payload.deliveryId);
    const d = await readHandoffState(tx, deliveryId, sender.inFlightMs);
    if (!d || d.status !== "pending") return;
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
      await again(sender.deferMs(d.organization_id));
      deps.log.debug("webhook delivery deferred: its organization's queue is full", { deliveryId });
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
