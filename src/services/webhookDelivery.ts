import { createHmac } from "node:crypto";
import { lookup } from "node:dns/promises";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import {
  countAttempt,
  endUncountedDelivery,
  lockDeliveryState,
  readDeliveryState,
  recordDeliveryOutcome,
} from "../db/webhookDeliveries.ts";
import type { Deps } from "../deps.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import type { HandlerContext, TimerHandler } from "../timers/types.ts";
import { isPrivateHost, webhookUrlProblem } from "./webhookUrls.ts";

/**
 * Delivering events to webhook endpoints: the event's JSON, signed per Standard
 * Webhooks, POSTed to every endpoint of the organization that subscribes to its type, in both modes
 * (receivers filter on `livemode`). At least once: a failure (an answer other than 2xx, or none within
 * 15 s) is retried 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after it, on the real clock.
 *
 * How: a trigger (sql/0011) creates a delivery row and the timer of its first attempt with each event.
 * The timer's handler counts the attempt and writes a safety-net timer for the next one; once that
 * commits, it hands the request to the sender, so no firing slot of the timer runner waits on a slow
 * receiver and a rolled-back attempt sends nothing. When the
 * outcome is known the sender records it (fenced on the attempt number) and replaces the safety net:
 * by nothing after a success, by the scheduled retry after a failure. If the process stops in
 * between, the safety net makes the next attempt: a receiver may see an event twice, never zero times.
 */

/** Delays after the 1st … 7th failure; after the 8th attempt fails the delivery is given up. */
export const RETRY_DELAYS_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
export const ATTEMPT_TIMEOUT_MS = 15_000;
/** How long after an attempt starts its safety net fires, beyond the retry delay (the outcome's write). */
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

interface Attempt {
  deliveryId: number;
  attempt: number;
  endpointId: string;
  url: string;
  secret: string;
  previousSecret: string | null;
  event: WebhookEvent;
  safetyNetId: string;
}

type Outcome = ({ ok: true; status: number } | { ok: false; status: number | null; error: string }) & {
  durationMs: number;
};

/** Addresses of a host name (injectable for tests). */
export type Resolve = (hostname: string) => Promise<string[]>;
const resolveWithDns: Resolve = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

/** Sends attempts with bounded concurrency, outside any transaction, and records their outcomes. */
export class WebhookSender {
  readonly #deps: Deps;
  readonly #timeoutMs: number;
  readonly #concurrency: number;
  readonly #maxQueued: number;
  readonly #resolve: Resolve;
  readonly #queue: Attempt[] = [];
  readonly #running = new Set<Promise<void>>();

  constructor(
    deps: Deps,
    opts: { timeoutMs?: number; concurrency?: number; maxQueued?: number; resolve?: Resolve } = {},
  ) {
    this.#deps = deps;
    this.#timeoutMs = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.#concurrency = opts.concurrency ?? 8;
    this.#maxQueued = opts.maxQueued ?? 10_000;
    this.#resolve = opts.resolve ?? resolveWithDns;
  }

  enqueue(attempt: Attempt): void {
    if (this.#queue.length >= this.#maxQueued) {
      // Memory stays bounded; the attempt's safety net makes it again later.
      this.#deps.log.warn("webhook sender queue full; the attempt waits for its safety net", {
        deliveryId: attempt.deliveryId,
      });
      return;
    }
    this.#queue.push(attempt);
    this.#pump();
  }

  /** Resolves when every attempt handed over so far has been sent and recorded. */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  /**
   * For shutdown: waits at most `ms` for the requests under way (the queue is dropped: those attempts
   * are counted, and their safety nets make them again later). True when nothing was left running.
   */
  async drain(ms: number): Promise<boolean> {
    this.#queue.length = 0;
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

  #pump(): void {
    while (this.#running.size < this.#concurrency && this.#queue.length > 0) {
      const attempt = this.#queue.shift()!;
      const run = this.#sendIfCurrent(attempt)
        .catch((err) =>
          // The safety net still makes the next attempt.
          this.#deps.log.error("webhook delivery outcome not recorded", {
            deliveryId: attempt.deliveryId,
            error: (err as Error).message,
          }),
        )
        .finally(() => {
          this.#running.delete(run);
          this.#pump();
        });
      this.#running.add(run);
    }
  }

  /** Skips an attempt that waited in the queue while a later one took over or the delivery ended. */
  async #sendIfCurrent(a: Attempt): Promise<void> {
    const current = await readDeliveryState(this.#deps.sql, a.deliveryId);
    if (current?.attempts !== a.attempt || current.status !== "pending") return;
    await recordOutcome(this.#deps, a, await this.#send(a));
  }

  async #send(a: Attempt): Promise<Outcome> {
    const started = performance.now();
    const outcome = await this.#request(a);
    return { ...outcome, durationMs: Math.round(performance.now() - started) } as Outcome;
  }

  async #request(
    a: Attempt,
  ): Promise<{ ok: true; status: number } | { ok: false; status: number | null; error: string }> {
    const allowPrivate = this.#deps.env.WEBHOOK_ALLOW_PRIVATE_URLS;
    const problem = webhookUrlProblem(a.url, allowPrivate);
    if (problem) return { ok: false, status: null, error: `url ${problem}` };
    if (!allowPrivate) {
      // The URL was checked as text; a public name may still resolve to a private address.
      const host = new URL(a.url).hostname;
      let addresses: string[];
      try {
        addresses = await this.#resolve(host.replace(/^\[|\]$/g, ""));
      } catch {
        return { ok: false, status: null, error: "host name not found" };
      }
      if (addresses.some((address) => isPrivateHost(address.includes(":") ? `[${address}]` : address))) {
        return { ok: false, status: null, error: "url resolves to a loopback, private or reserved address" };
      }
    }
    const body = JSON.stringify(a.event);
    const timestamp = Math.floor(this.#deps.clock.now().getTime() / 1000);
    try {
      const res = await fetch(a.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "voice-service-webhooks/1",
          "webhook-id": a.event.id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signatureHeader(a, a.event.id, timestamp, body),
        },
        body,
        // A redirect is an answer other than 2xx: following it could lead anywhere.
        redirect: "manual",
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      await res.body?.cancel().catch(() => {});
      if (res.status >= 200 && res.status < 300) return { ok: true, status: res.status };
      return { ok: false, status: res.status, error: `answered ${res.status}` };
    } catch (err) {
      const timedOut = (err as Error).name === "TimeoutError";
      return {
        ok: false,
        status: null,
        error: timedOut ? `no answer within ${this.#timeoutMs} ms` : "request failed",
      };
    }
  }
}

/**
 * Writes an attempt's outcome, unless a later attempt already took over (the attempt number fences
 * it), and replaces the attempt's safety net with what comes next.
 */
export async function recordOutcome(deps: Deps, a: Attempt, outcome: Outcome): Promise<void> {
  const scheduler = deps.timers;
  const finished = outcome.ok || a.attempt >= MAX_ATTEMPTS;
  const status = outcome.ok ? "delivered" : finished ? "failed" : "pending";
  await pipelinedTransaction(deps.sql, async (tx) => {
    // Locks in the order a firing safety net takes them (its timer row, then the delivery row), so the
    // two never wait on each other. If this attempt is stale, its net has fired already: a no-op.
    await scheduler.cancel(tx, a.safetyNetId);
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
      eventId: a.event.id,
      attempt: a.attempt,
      error: outcome.error,
      ...(finished ? { givenUp: true } : { retryInMs: RETRY_DELAYS_MS[a.attempt - 1] }),
    });
  }
}

/** The handler of `webhook.deliver` timers: counts the attempt and hands it to the sender. */
export function deliverWebhook(deps: Pick<Deps, "log">, sender: WebhookSender): TimerHandler {
  return async ({ tx, timer, schedule, afterCommit }: HandlerContext) => {
    const deliveryId = Number(timer.payload.deliveryId);
    const d = await countAttempt(tx, deliveryId, MAX_ATTEMPTS);
    if (!d) {
      // The endpoint was deleted (dropped), or the last attempt's outcome was never written (failed).
      await endUncountedDelivery(tx, deliveryId);
      return;
    }
    const net = await schedule({
      kind: TIMER_KINDS.webhookDelivery,
      delayMs: ATTEMPT_TIMEOUT_MS + SAFETY_MARGIN_MS + (RETRY_DELAYS_MS[d.attempts - 1] ?? 0),
      payload: { deliveryId },
    });
    const attempt: Attempt = {
      deliveryId,
      attempt: d.attempts,
      endpointId: d.endpoint_id,
      url: d.url,
      secret: d.secret,
      previousSecret: d.previous_secret,
      safetyNetId: net.id,
      event: {
        id: d.event_id,
        type: d.type,
        livemode: d.livemode,
        createdAt: d.created_at.toISOString(),
        data: d.data,
      },
    };
    // Only a counted attempt is sent: after a rollback the timer fires again and counts it then.
    afterCommit(() => sender.enqueue(attempt));
    deps.log.debug("webhook attempt counted", { deliveryId, attempt: d.attempts });
  };
}
