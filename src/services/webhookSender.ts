import { pipelinedTransaction, settledAll } from "../db/engine/connection.ts";
import { bringWaitingDeliveriesForward, type InsertedTimerRow, makeTimersDue } from "../db/timers.ts";
import {
  lockDeliveryState,
  recordDeliveryOutcome,
  type StartedAttempt,
  startAttempt,
} from "../db/webhookDeliveries.ts";
import type { Deps } from "../deps.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import {
  ATTEMPT_TIMEOUT_MS,
  type DeliveryQueue,
  MAX_ATTEMPTS,
  type QueuedDelivery,
  RETRY_DELAYS_MS,
  signatureHeader,
  type WebhookEvent,
} from "./webhookDelivery.ts";
import { postWebhook, type Resolve, resolveWithDns, type WebhookAnswer } from "./webhookRequest.ts";
import { isPrivateAddress, webhookUrlProblem } from "./webhookUrls.ts";

/**
 * The process's sender of webhook attempts (how deliveries move is told in webhookDelivery.ts): queues
 * and request slots per organization, the attempt counted as its request starts, the outcome recorded.
 *
 * Slots. A receiver that hangs holds its request's slot for the whole time bound (15 s), so the slots
 * are shared out so that no number of hanging receivers can hold the slot a healthy organization needs:
 * - an organization has at most `perOrganization` (4) requests in flight;
 * - its first one needs only a free socket (fewer than `concurrency`, 512, in flight in all);
 * - its 2nd to 4th come from a pool of `shared` (64) for all organizations together.
 * Organizations with nothing in flight are served first, the others in turn. So hanging receivers hold
 * one slot per organization plus the shared pool at most, and an organization whose receiver answers
 * gets its first slot at once unless `concurrency − shared` (448) organizations hang in this one
 * process at the same moment (and its other three as soon as the shared pool has room: always while
 * fewer than 22 organizations hang with all their four).
 *
 * Bounds. Sockets: at most `concurrency` requests (one connection each, never pooled), which leaves
 * room within the usual limit of 1,024 open files for the database's and the server's own connections.
 * Memory: per request its body and its socket's buffers, a few tens of kilobytes for the usual event,
 * so some megabytes at most; queues: at most `queuePerOrganization` (256) small records per
 * organization, the rest waiting in the timers table.
 */

/** Beyond an attempt's own bound, how long its outcome may take to be written before it is taken as lost. */
const SAFETY_MARGIN_MS = 30_000;
/** How long a delivery waiting in memory is held before its timer looks at it again (a process lost). */
const HOLD_MS = 5 * 60_000;
/** A delivery waiting for room in its organization's queue comes back by then at the latest. */
const WAITING_MS = 10 * 60_000;

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
  /** Requests in flight at once, all organizations together: the bound on sockets. */
  concurrency?: number;
  /** Requests in flight at once for one organization. */
  perOrganization?: number;
  /**
   * Requests in flight beyond each organization's first, all organizations together; the rest of
   * `concurrency` is kept for the first request of organizations that have none in flight.
   */
  shared?: number;
  /** Deliveries of one organization waiting in memory at most. */
  queuePerOrganization?: number;
  resolve?: Resolve;
}

interface Organization {
  queue: QueuedDelivery[];
  running: number;
  /** Deliveries of this organization were told to wait for room (and may not all be back yet). */
  waiting: boolean;
  /** A statement bringing waiting deliveries forward is under way. */
  pulling: boolean;
  /**
   * Places promised by `accepts` to handlers whose transactions have not committed yet, and by
   * `#pull` to the deliveries it brought forward, by delivery, until when (performance.now() time): a
   * rolled-back handler never comes, nor a brought delivery another process took, so a promise lapses.
   */
  promised: Map<number, number>;
}

/** How long a place promised to a handler is kept for its `enqueue`. */
const PROMISE_MS = 60_000;

/** Sends attempts outside any transaction, fairly between organizations, and records their outcomes. */
export class WebhookSender implements DeliveryQueue {
  readonly #deps: Deps;
  readonly #timeoutMs: number;
  readonly #concurrency: number;
  readonly #perOrganization: number;
  readonly #shared: number;
  readonly #queuePerOrganization: number;
  readonly #resolve: Resolve;
  readonly #organizations = new Map<string, Organization>();
  /**
   * Organizations with waiting deliveries and a free slot, in the order their turn comes: those with
   * nothing in flight (served first, from the sockets kept for them), and the others (from the shared
   * pool). An organization whose slots are all busy is in neither until a request of its ends.
   */
  readonly #idleTurns = new Set<string>();
  readonly #busyTurns = new Set<string>();
  /** Organizations with a request in flight: each holds one slot outside the shared pool. */
  #busyOrganizations = 0;
  /** Deliveries this process holds (waiting or under way), by id. */
  readonly #held = new Map<number, QueuedDelivery>();
  readonly #running = new Set<Promise<void>>();

  constructor(deps: Deps, opts: SenderOptions = {}) {
    this.#deps = deps;
    this.#timeoutMs = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.#concurrency = opts.concurrency ?? 512;
    this.#perOrganization = Math.min(opts.perOrganization ?? 4, this.#concurrency);
    this.#shared = Math.min(opts.shared ?? 64, this.#concurrency);
    this.#queuePerOrganization = opts.queuePerOrganization ?? 256;
    this.#resolve = opts.resolve ?? resolveWithDns;
  }

  /** How long a delivery handed over waits here before its holding timer looks at it again. */
  get holdMs(): number {
    return HOLD_MS;
  }

  /** The longest an attempt's outcome may take to be written: past it, the attempt is taken as lost. */
  get inFlightMs(): number {
    return this.#timeoutMs + SAFETY_MARGIN_MS;
  }

  /**
   * Whether the organization's queue has room for one more delivery (or already holds this one); if
   * so, the place is promised to it until its `enqueue`, so the handlers of one firing batch cannot
   * together overfill the queue.
   */
  accepts(organizationId: string, deliveryId: number): boolean {
    if (this.#held.has(deliveryId)) return true;
    const org = this.#organization(organizationId);
    const now = performance.now();
    for (const [id, until] of org.promised) if (until <= now) org.promised.delete(id);
    if (org.promised.has(deliveryId)) return true;
    if (org.queue.length + org.promised.size >= this.#queuePerOrganization) return false;
    org.promised.set(deliveryId, now + PROMISE_MS);
    return true;
  }

  /** How long a delivery that found its organization's queue full waits at most for room. */
  get waitingMs(): number {
    return WAITING_MS;
  }

  /** A delivery of the organization was told to wait for room: bring it forward once there is some. */
  noteWaiting(organizationId: string): void {
    this.#organization(organizationId).waiting = true;
  }

  /**
   * Brings waiting deliveries forward when the organization's queue is half empty, as many as there
   * is room for; their timers then hand them over as usual. Their places are promised to them at
   * once: otherwise the deliveries of new events, due as soon as they are written, took the room
   * before the brought ones' timers fired, which then waited again at the back of the line (under a
   * burst of events a delivery went round five or six times). Once fewer come than asked for,
   * nothing waits (for this process to know of) until the next deferral.
   */
  #pull(organizationId: string, org: Organization): void {
    const taken = org.queue.length + org.promised.size;
    if (!org.waiting || org.pulling || taken > this.#queuePerOrganization / 2) return;
    org.pulling = true;
    const room = this.#queuePerOrganization - taken;
    bringWaitingDeliveriesForward(this.#deps.sql, organizationId, room)
      .then((brought) => {
        const until = performance.now() + PROMISE_MS;
        for (const deliveryId of brought) org.promised.set(deliveryId, until);
        if (brought.length < room) org.waiting = false;
      })
      .catch((err) =>
        // They come back when their timers are due anyway.
        this.#deps.log.warn("waiting webhook deliveries not brought forward", {
          organizationId,
          error: (err as Error).message,
        }),
      )
      .finally(() => {
        org.pulling = false;
        this.#forgetIfIdle(organizationId, org);
      });
  }

  #organization(organizationId: string): Organization {
    let org = this.#organizations.get(organizationId);
    if (!org) {
      // Organizations are kept while their deliveries wait; the idle ones go before memory grows (a
      // waiting delivery forgotten here comes back when its timer is due).
      if (this.#organizations.size >= 1_000) {
        for (const [id, o] of this.#organizations) {
          if (o.queue.length === 0 && o.running === 0 && o.promised.size === 0 && !o.pulling) {
            this.#organizations.delete(id);
          }
        }
      }
      org = { queue: [], running: 0, waiting: false, pulling: false, promised: new Map() };
      this.#organizations.set(organizationId, org);
    }
    return org;
  }

  /** Forgets an organization with nothing queued, running or waiting. */
  #forgetIfIdle(organizationId: string, org: Organization): void {
    if (
      org.running === 0 &&
      org.queue.length === 0 &&
      org.promised.size === 0 &&
      !org.waiting &&
      !org.pulling
    ) {
      this.#organizations.delete(organizationId);
    }
  }

  /** Takes a delivery to send (after the handing transaction committed). */
  enqueue(d: QueuedDelivery): void {
    const held = this.#held.get(d.deliveryId);
    if (held) {
      // Its holding timer fired while it waited here, and a new one holds it now.
      held.heldBy = d.heldBy;
      return;
    }
    // Accepted by its handler (`accepts`), which promised it this place.
    const org = this.#organization(d.organizationId);
    org.promised.delete(d.deliveryId);
    org.queue.push(d);
    this.#held.set(d.deliveryId, d);
    this.#takeTurn(d.organizationId, org);
    this.#pump();
  }

  /** Puts an organization with waiting deliveries and a free slot in line (once), by what it has in flight. */
  #takeTurn(organizationId: string, org: Organization): void {
    if (org.queue.length === 0 || org.running >= this.#perOrganization) return;
    if (org.running === 0) {
      this.#busyTurns.delete(organizationId);
      this.#idleTurns.add(organizationId);
    } else if (!this.#idleTurns.has(organizationId)) {
      this.#busyTurns.add(organizationId);
    }
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
    this.#idleTurns.clear();
    this.#busyTurns.clear();
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

  /**
   * Starts requests while slots are free: first for organizations with nothing in flight (any free
   * socket), then in turn for the others (the shared pool).
   */
  #pump(): void {
    while (this.#running.size < this.#concurrency) {
      const orgId =
        first(this.#idleTurns) ?? (this.#sharedInUse() < this.#shared ? first(this.#busyTurns) : undefined);
      if (orgId === undefined) return;
      this.#idleTurns.delete(orgId);
      this.#busyTurns.delete(orgId);
      this.#start(orgId, this.#organizations.get(orgId)!);
    }
  }

  /** Requests in flight beyond each organization's first. */
  #sharedInUse(): number {
    return this.#running.size - this.#busyOrganizations;
  }

  #start(orgId: string, org: Organization): void {
    const d = org.queue.shift()!;
    if (org.running++ === 0) this.#busyOrganizations++;
    // Its next delivery waits for its next turn, behind the organizations already in line.
    this.#takeTurn(orgId, org);
    const run = this.#attempt(d)
      .catch((err) =>
        // Its timers still bring it back.
        this.#deps.log.error("webhook delivery attempt not recorded", {
          deliveryId: d.deliveryId,
          error: (err as Error).message,
        }),
      )
      .finally(() => {
        if (--org.running === 0) this.#busyOrganizations--;
        this.#held.delete(d.deliveryId);
        this.#running.delete(run);
        this.#takeTurn(orgId, org);
        this.#pull(orgId, org);
        this.#forgetIfIdle(orgId, org);
        this.#pump();
      });
    this.#running.add(run);
  }

  async #attempt(d: QueuedDelivery): Promise<void> {
    const deps = this.#deps;
    const started = await startAttempt(
      deps.sql,
      { id: d.deliveryId, attempt: d.attempt, heldBy: d.heldBy, outcomeWithinMs: this.inFlightMs },
      (rows) => deps.timers.insertFrom(deps.sql, rows),
    );
    if (!started) {
      // Started elsewhere, finished meanwhile, or its endpoint was disabled or deleted: its holding timer
      // takes it from here, made due now so that a delivery that can no longer be sent ends at once
      // (dropped) instead of showing `pending` until the hold runs out. Started elsewhere, that timer
      // is gone already.
      await makeTimersDue(deps.sql, [d.heldBy]);
      deps.timers.soon();
      return;
    }
    deps.timers.scheduled([started.net as InsertedTimerRow]);
    const outcome = await this.#send(started);
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
          { secret: a.secret, previousSecrets: a.previous_secrets },
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

/** The first of a set in its order, if any. */
function first<T>(set: Set<T>): T | undefined {
  for (const v of set) return v;
  return undefined;
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
    // never wait on each other: both statements go out together (with the `begin`, one round trip)
    // and the session runs them in that order. If this attempt is stale, its timer has fired already:
    // a no-op. The delivery is locked and read before writing: an update fenced on `attempts` would
    // judge a row changed by a transaction still running by its older version; the lock waits for
    // that transaction instead.
    const [, current] = await settledAll([
      scheduler.cancel(tx, a.netId),
      lockDeliveryState(tx, a.deliveryId),
    ]);
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
