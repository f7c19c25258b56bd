import type { Fragment, Sql } from "postgres";
import { type Db, pipelinedTransaction, settledAll } from "../db/engine/connection.ts";
import {
  claimDue,
  deleteTimer,
  type HeldTimer,
  heldTimers,
  type InsertedTimerRow,
  insertTimer,
  insertTimersFrom,
  type NewTimer,
  releaseLeases,
  renewLeases,
  type TimerLease,
  takeOwned,
} from "../db/timers.ts";
import type { Logger } from "../log.ts";
import { type AfterBatch, runHandlers } from "./batch.ts";
import { recordFailure } from "./failures.ts";
import { RunnerLiveness } from "./liveness.ts";
import { type ResolvedRunnerOptions, type RunnerOptions, withDefaults } from "./options.ts";
import type { TimerScheduler } from "./scheduler.ts";
import { RunnerStatistics, type RunnerStats } from "./stats.ts";
import { type BatchTimerHandler, eachTimer, type TimerHandler } from "./types.ts";
import { TimerWheel, type WheelTimer } from "./wheel.ts";

interface Entry {
  held: HeldTimer;
  /** Local (performance.now) time it is due. */
  localDue: number;
  /** Local time its lease ends. */
  localLeaseEnd: number;
  /** Inserted by an outside transaction that may not have committed yet. */
  unconfirmed: boolean;
  retries: number;
  wheel: WheelTimer<Entry> | null;
  /** Local time the wheel handed it over for firing. */
  readyAt: number;
}

/** How soon a poll follows `soon()`: a little after the usual commit of the transaction that asked. */
const SOON_POLL_MS = 25;
/** Then a second look, for a writer whose commit came later (a busy database), before the next poll. */
const SECOND_LOOK_MS = 250;

/** A firing that ran ahead of its take got fewer rows than its batch: roll back, fire with care. */
class PartlyOwned extends Error {}

/**
 * The one timer runner of a process: the wheel in memory for timers due soon, the timers table for
 * all of them. It claims due and near rows with a lease, fires them from the wheel in batches (one
 * transaction per batch: lock the rows still owned, run the handlers, delete the rows), retries
 * failures with backoff and records their error, and hands its leases back when it stops.
 */
export class TimerRunner implements TimerScheduler {
  readonly #sql: Sql;
  readonly #log: Logger;
  readonly #opts: ResolvedRunnerOptions;
  readonly #handlers = new Map<string, BatchTimerHandler>();
  readonly #databaseOnly = new Set<string>();
  readonly #wheel = new TimerWheel<Entry>({ now: performance.now() });
  readonly #held = new Map<string, Entry>();
  readonly #ready: Entry[] = [];
  readonly #inFlight = new Set<Promise<void>>();
  readonly #stats = new RunnerStatistics();
  readonly #liveness: RunnerLiveness;
  #running = false;
  #stopping = false;
  #pollTimer: ReturnType<typeof setTimeout> | null = null;
  #pollDueAt = 0;
  /** `soon()` was called while a poll was under way: the next one comes shortly after it. */
  #pollAgainSoon = false;
  /** The poll `soon()` asked for is followed by a second look after `SECOND_LOOK_MS`. */
  #secondLook = false;
  #livenessCheckedAt = Number.NEGATIVE_INFINITY;
  #polling: Promise<void> | null = null;
  #wakeTimer: ReturnType<typeof setTimeout> | null = null;
  #wakeAt = Number.POSITIVE_INFINITY;

  constructor(opts: RunnerOptions) {
    this.#sql = opts.sql;
    this.#log = opts.log;
    this.#opts = withDefaults(opts);
    this.#liveness = new RunnerLiveness(opts.sql, this.#opts.liveness);
  }

  /** Registers the handler of a kind, called once per timer. One handler per kind. */
  register(kind: string, handler: TimerHandler): this {
    return this.registerBatch(kind, eachTimer(handler));
  }

  /**
   * Registers the batch handler of a kind. One handler per kind. `databaseOnly`: the handler does
   * nothing outside its transaction (no call to another service), so its statements may be sent
   * before the runner knows it still owns the rows: they go out behind the take, a round trip fewer,
   * and all of it rolls back if a row turned out not to be ours.
   */
  registerBatch(kind: string, handler: BatchTimerHandler, opts: { databaseOnly?: boolean } = {}): this {
    if (this.#handlers.has(kind)) throw new Error(`a handler for timer kind "${kind}" is already registered`);
    this.#handlers.set(kind, handler);
    if (opts.databaseOnly) this.#databaseOnly.add(kind);
    return this;
  }

  get runnerId(): number {
    return this.#liveness.runner;
  }

  /** Takes the liveness lock, then claims overdue and near rows at once and keeps polling. */
  async start(): Promise<void> {
    if (this.#running) return;
    await this.#liveness.acquire();
    this.#running = true;
    this.#stopping = false;
    this.#log.info("timer runner started", { runner: this.#liveness.runner });
    await this.#poll();
  }

  /** Stops claiming, waits for the handlers in flight, gives back the leases of unfired timers. */
  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#stopping = true;
    if (this.#pollTimer) clearTimeout(this.#pollTimer);
    if (this.#wakeTimer) clearTimeout(this.#wakeTimer);
    this.#pollTimer = null;
    this.#wakeTimer = null;
    await this.#polling;
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    this.#wheel.clear();
    this.#ready.length = 0;
    this.#held.clear();
    try {
      await releaseLeases(this.#sql, this.#liveness.runner);
    } catch (err) {
      this.#log.warn("timer runner: could not release its leases", { error: (err as Error).message });
    }
    // Whatever became of the leases: the lock's session is the runner's own and must close.
    await this.#liveness.release().catch((err) => {
      this.#log.warn("timer runner: could not release its liveness lock", { error: (err as Error).message });
    });
    this.#running = false;
    this.#log.info("timer runner stopped", this.stats() as unknown as Record<string, unknown>);
  }

  /**
   * Leaves as a crash would: drops everything in memory and its liveness lock, but not its leases,
   * so its rows stay leased to a runner that is gone, and other runners take them over at once.
   */
  async abandon(): Promise<void> {
    this.#stopping = true;
    if (this.#pollTimer) clearTimeout(this.#pollTimer);
    if (this.#wakeTimer) clearTimeout(this.#wakeTimer);
    await this.#polling;
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    this.#wheel.clear();
    this.#held.clear();
    this.#ready.length = 0;
    await this.#liveness.release().catch(() => {});
    this.#running = false;
  }

  stats(): RunnerStats {
    return this.#stats.report(this.#liveness.runner, this.#held.size);
  }

  // ——— TimerScheduler ———

  /**
   * Writes the timer in the caller's transaction. One due within the horizon is leased to this
   * runner and placed in the wheel at once; if the caller's transaction has not committed when it
   * comes due, the runner looks again shortly (and forgets it once its lease is over: a rolled-back
   * timer never existed).
   */
  async schedule(sql: Db, timer: NewTimer): Promise<{ id: string; dueAt: Date }> {
    const live = this.#running && !this.#stopping;
    const held = await insertTimer(sql, timer, live ? this.#lease() : undefined);
    if (live && held.leased) this.#arm(held, performance.now(), true);
    return { id: held.id, dueAt: new Date(held.dueMs) };
  }

  /** `schedule` as a `with` entry: leased the same way, armed by `scheduled` once the statement answered. */
  insertFrom(sql: Db, rows: Fragment): Fragment {
    const live = this.#running && !this.#stopping;
    return insertTimersFrom(sql, rows, live ? this.#lease() : undefined);
  }

  scheduled(rows: readonly InsertedTimerRow[]): void {
    if (!this.#running || this.#stopping) return;
    const now = performance.now();
    for (const held of heldTimers(rows)) if (held.leased) this.#arm(held, now, true);
  }

  /**
   * Deletes the row in the caller's transaction. A wheel entry for it, if any, stays: when it comes
   * due it finds no row and is dropped, and if the caller's transaction rolls back it still fires.
   */
  cancel(sql: Db, id: string): Promise<boolean> {
    return deleteTimer(sql, id);
  }

  /**
   * The rows are gone for good (their cancel committed): their wheel entries go too. One already
   * handed over for firing is left to find no row.
   */
  cancelled(ids: readonly string[]): void {
    for (const id of ids) {
      const entry = this.#held.get(id);
      if (!entry?.wheel) continue;
      this.#wheel.cancel(entry.wheel);
      this.#held.delete(id);
    }
  }

  // ——— internals ———

  /** The lease of the timers this runner inserts. */
  #lease(): TimerLease {
    return { runner: this.#liveness.runner, horizonMs: this.#opts.horizonMs, leaseMs: this.#opts.leaseMs };
  }

  /** Checks the liveness session still stands; if it was lost, what was held under the old number goes. */
  async #checkLiveness(): Promise<void> {
    const lost = await this.#liveness.check();
    if (!lost) return;
    this.#log.warn("timer runner: liveness connection lost, took a new lease identity", {
      error: lost.message,
    });
    // Timers held under the old number are now anyone's: forget them, the poll claims them again.
    this.#wheel.clear();
    this.#held.clear();
  }

  /**
   * Timers were written by a statement of this process that did not go through `schedule` (the
   * trigger that writes an event's webhook deliveries and their timers): the next poll comes within
   * `SOON_POLL_MS` instead of the poll interval, late enough for the writing transaction to have
   * committed in the usual case, and a second look `SECOND_LOOK_MS` after it finds a later commit.
   * Calls in quick succession make one poll.
   */
  soon(): void {
    if (!this.#running || this.#stopping) return;
    this.#secondLook = true;
    if (this.#pollTimer === null) {
      // A poll is under way: it may claim before the writer commits, so another follows it shortly.
      this.#pollAgainSoon = true;
      return;
    }
    if (this.#pollDueAt <= performance.now() + SOON_POLL_MS) return;
    clearTimeout(this.#pollTimer);
    this.#pollTimer = null;
    this.#schedulePoll(SOON_POLL_MS);
  }

  #schedulePoll(delay: number): void {
    if (this.#stopping) return;
    this.#pollDueAt = performance.now() + delay;
    this.#pollTimer = setTimeout(() => {
      this.#pollTimer = null;
      this.#polling = this.#poll();
    }, delay);
  }

  async #poll(): Promise<void> {
    let delay = this.#opts.pollIntervalMs;
    try {
      // Once per interval, however many polls `soon()` adds between.
      const now = performance.now();
      if (now - this.#livenessCheckedAt >= this.#opts.pollIntervalMs) {
        this.#livenessCheckedAt = now;
        await this.#checkLiveness();
      }
      for (;;) {
        if (this.#stopping) return;
        const room = this.#opts.maxHeld - this.#held.size;
        if (room <= 0) break;
        const limit = Math.min(this.#opts.claimBatch, room);
        const { timers, answeredAt } = await claimDue(this.#sql, { ...this.#lease(), limit });
        // The database read its clock before its answer arrived: taking the arrival as that moment
        // places every due time a little late, never early (a claim may wait for a connection first).
        for (const t of timers) this.#arm(t, answeredAt, false);
        if (timers.length < limit) break;
      }
      await this.#renewLapsingLeases();
    } catch (err) {
      if (!this.#stopping) {
        this.#log.warn("timer runner: poll failed", { error: (err as Error).message });
        delay = Math.min(5_000, delay * 2);
      }
    } finally {
      // After a failed poll the backoff stands, whatever asked for a poll soon.
      let next = delay;
      if (delay === this.#opts.pollIntervalMs) {
        if (this.#pollAgainSoon) next = SOON_POLL_MS;
        else if (this.#secondLook) {
          next = SECOND_LOOK_MS;
          this.#secondLook = false;
        }
        next = Math.min(delay, next);
      }
      this.#pollAgainSoon = false;
      this.#schedulePoll(next);
    }
  }

  /** Rows held past a third of their lease (a backlog) get their lease extended. */
  async #renewLapsingLeases(): Promise<void> {
    const now = performance.now();
    const margin = this.#opts.leaseMs / 3;
    const lapsing: Entry[] = [];
    for (const e of this.#held.values())
      if (e.localLeaseEnd - now < margin && !e.unconfirmed) lapsing.push(e);
    if (lapsing.length === 0) return;
    await renewLeases(
      this.#sql,
      this.#liveness.runner,
      lapsing.map((e) => e.held),
      this.#opts.leaseMs,
    );
    for (const e of lapsing) e.localLeaseEnd = now + this.#opts.leaseMs;
  }

  /** Places a held timer in the wheel, `at` being the local time its dbNowMs was read. */
  #arm(held: HeldTimer, at: number, unconfirmed: boolean): void {
    if (this.#stopping) return;
    const previous = this.#held.get(held.id);
    if (previous) {
      if (previous.held.epoch >= held.epoch && previous.wheel) return;
      if (previous.wheel) this.#wheel.cancel(previous.wheel);
    }
    const localDue = at + (held.dueMs - held.dbNowMs);
    const entry: Entry = {
      held,
      localDue,
      localLeaseEnd: Math.max(localDue, at) + this.#opts.leaseMs,
      unconfirmed,
      retries: 0,
      wheel: null,
      readyAt: 0,
    };
    this.#held.set(held.id, entry);
    entry.wheel = this.#wheel.schedule(localDue, entry);
    this.#wake(localDue);
  }

  #wake(at: number): void {
    if (this.#stopping || at >= this.#wakeAt) return;
    if (this.#wakeTimer) clearTimeout(this.#wakeTimer);
    this.#wakeAt = at;
    this.#wakeTimer = setTimeout(() => this.#tick(), Math.max(0, at - performance.now()));
  }

  #tick(): void {
    this.#wakeTimer = null;
    this.#wakeAt = Number.POSITIVE_INFINITY;
    if (this.#stopping) return;
    const now = performance.now();
    this.#wheel.advance(now, (entry) => {
      entry.wheel = null;
      entry.readyAt = now;
      this.#stats.wakeDelay.record(now - entry.localDue);
      this.#ready.push(entry);
    });
    this.#pump();
    const next = this.#wheel.nextDeadline();
    if (next !== null) this.#wake(next);
  }

  #pump(): void {
    while (!this.#stopping && this.#ready.length > 0 && this.#inFlight.size < this.#opts.concurrency) {
      const batch = this.#ready.splice(0, this.#opts.batchSize);
      const now = performance.now();
      for (const e of batch) this.#stats.queueWait.record(now - e.readyAt);
      const run = this.#fire(batch)
        .catch((err) => this.#log.error("timer runner: firing failed", { error: (err as Error).message }))
        .finally(() => {
          this.#inFlight.delete(run);
          this.#pump();
        });
      this.#inFlight.add(run);
    }
  }

  /**
   * Fires a batch in one transaction; if anything in it fails, fires each timer on its own. When
   * every timer of the batch is of a `databaseOnly` kind, the handlers run without waiting for the
   * take's answer (the usual case: the rows are ours); if the take got fewer rows, the transaction
   * rolls back and the batch fires again the careful way.
   */
  async #fire(batch: Entry[], mayRunAhead = true): Promise<void> {
    const after: AfterBatch = { followUps: [], committed: [] };
    const begun = performance.now();
    const ahead =
      mayRunAhead &&
      batch.every((e) => this.#databaseOnly.has(e.held.kind) && this.#held.get(e.held.id) === e);
    let ran: Entry[] = [];
    let missing: Entry[] = [];
    try {
      // Under load every round trip waits for a core: they are most of a timer's lateness, so the
      // transaction's begin goes out with its first statement.
      await pipelinedTransaction(this.#sql, async (tx) => {
        const taking = takeOwned(
          tx,
          this.#liveness.runner,
          batch.map((e) => e.held),
        );
        if (ahead) {
          const [owned] = await settledAll([taking, this.#runHandlers(tx, batch, after)]);
          if (owned.size < batch.length) throw new PartlyOwned();
          ran = batch;
          return;
        }
        const owned = await taking;
        const mine = (e: Entry) => owned.has(e.held.id) && this.#held.get(e.held.id) === e;
        ran = batch.filter(mine);
        missing = batch.filter((e) => !mine(e));
        await this.#runHandlers(tx, ran, after);
      });
    } catch (err) {
      if (err instanceof PartlyOwned) return this.#fire(batch, false);
      if (batch.length > 1) {
        for (const e of batch) await this.#fire([e]);
        return;
      }
      await this.#recordFailure(batch[0]!, err);
      return;
    }
    const now = performance.now();
    this.#stats.transactionTime.record(now - begun);
    this.#stats.transactions++;
    for (const e of ran) {
      this.#held.delete(e.held.id);
      this.#stats.lateness.record(now - e.localDue);
      this.#stats.fired++;
    }
    for (const e of missing) this.#notOwned(e, now);
    const at = performance.now();
    for (const t of after.followUps) this.#arm(t, at, false);
    for (const fn of after.committed) {
      try {
        fn();
      } catch (err) {
        this.#log.error("timer runner: work after a commit failed", { error: (err as Error).message });
      }
    }
  }

  #runHandlers(tx: Db, entries: Entry[], after: AfterBatch): Promise<void> {
    return runHandlers(
      tx,
      this.#handlers,
      entries.map((e) => e.held),
      this.#lease(),
      after,
    );
  }

  /** The row was not ours to fire: taken over, cancelled, or (for our own insert) not committed yet. */
  #notOwned(entry: Entry, now: number): void {
    if (entry.unconfirmed && now < entry.localLeaseEnd && !this.#stopping) {
      entry.retries++;
      const retryAt = now + Math.min(5 * 2 ** entry.retries, 250);
      entry.wheel = this.#wheel.schedule(retryAt, entry);
      this.#wake(retryAt);
      return;
    }
    if (this.#held.get(entry.held.id) === entry) this.#held.delete(entry.held.id);
  }

  async #recordFailure(entry: Entry, err: unknown): Promise<void> {
    if (this.#held.get(entry.held.id) === entry) this.#held.delete(entry.held.id);
    this.#stats.failures++;
    await recordFailure(this.#sql, this.#log, entry.held, err, {
      runner: this.#liveness.runner,
      backoff: this.#opts.backoff,
      maxAttempts: this.#opts.maxAttempts,
    });
  }
}
export type { RunnerOptions } from "./options.ts";
export type { RunnerStats } from "./stats.ts";
