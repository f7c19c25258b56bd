/**
 * A hierarchical timing wheel in memory (Varghese & Lauck; the Linux kernel's timer wheel).
 *
 * Four levels of 256 slots. Level 0 has one slot per tick (1 ms by default), level 1 one slot per
 * 256 ticks, and so on: at 1 ms per tick the wheel spans about 49 days, and anything beyond sits in
 * an overflow list looked at once per level-3 turn. Every slot is an intrusive doubly linked list,
 * so `schedule` and `cancel` are O(1) and allocate one entry. `advance(now)` walks the ticks that
 * have passed, moving the entries of a higher level down when its slot comes round ("cascade"), and
 * fires the entries of each level-0 slot, whose deadline is exactly that tick.
 *
 * The wheel knows nothing of the database: the durable runner (runner.ts) keeps in here only the
 * timers due soon, and the database row stays the truth.
 */

const SLOT_BITS = 8;
const SLOTS = 1 << SLOT_BITS;
const SLOT_MASK = SLOTS - 1;
const LEVELS = 4;
/** Span of each level in ticks: 256, 65,536, 16,777,216, 4,294,967,296. */
const SPAN = [SLOTS, SLOTS ** 2, SLOTS ** 3, SLOTS ** 4] as const;
const OVERFLOW = LEVELS * SLOTS;

/** One scheduled entry. Treat it as an opaque handle: pass it back to `cancel`. */
export class WheelTimer<T> {
  /** Deadline in ticks since the wheel's origin. */
  tick: number;
  value: T;
  /** Index of the list it sits in (level × 256 + slot, or OVERFLOW), −1 when not scheduled. */
  slot = -1;
  next: WheelTimer<T> | null = null;
  prev: WheelTimer<T> | null = null;
  constructor(tick: number, value: T) {
    this.tick = tick;
    this.value = value;
  }
  get scheduled(): boolean {
    return this.slot !== -1;
  }
}

export interface WheelOptions {
  /** Milliseconds per tick (default 1). */
  tickMs?: number;
  /** The wheel's "now" at creation, in the same unit as later `advance(now)` calls (default Date.now()). */
  now?: number;
}

export class TimerWheel<T> {
  readonly tickMs: number;
  readonly #origin: number;
  /** The last tick processed: everything with a deadline ≤ #current has fired. */
  #current = 0;
  #size = 0;
  readonly #heads: (WheelTimer<T> | null)[] = new Array(OVERFLOW + 1).fill(null);
  readonly #tails: (WheelTimer<T> | null)[] = new Array(OVERFLOW + 1).fill(null);

  constructor(opts: WheelOptions = {}) {
    this.tickMs = opts.tickMs ?? 1;
    this.#origin = opts.now ?? Date.now();
  }

  get size(): number {
    return this.#size;
  }

  /** The time up to which the wheel has fired, in the caller's unit. */
  get now(): number {
    return this.#origin + this.#current * this.tickMs;
  }

  /**
   * Schedules `value` to fire at time `at` (same unit as `advance`). A time already passed fires on the
   * next `advance`. Deadlines are rounded up to the tick, so a timer never fires early.
   */
  schedule(at: number, value: T): WheelTimer<T> {
    const tick = Math.max(this.#current + 1, Math.ceil((at - this.#origin) / this.tickMs));
    const timer = new WheelTimer(tick, value);
    this.#place(timer);
    this.#size++;
    return timer;
  }

  /** Removes a pending timer. Returns false when it already fired or was cancelled. */
  cancel(timer: WheelTimer<T>): boolean {
    if (timer.slot === -1) return false;
    this.#unlink(timer);
    this.#size--;
    return true;
  }

  /**
   * Moves the wheel to `now` and calls `fire` for every timer whose deadline has passed, in deadline
   * order (insertion order within one tick). `fire` may schedule or cancel timers. Returns how many fired.
   */
  advance(now: number, fire: (value: T, timer: WheelTimer<T>) => void): number {
    const target = Math.floor((now - this.#origin) / this.tickMs);
    if (target <= this.#current) return 0;
    if (this.#size === 0) {
      // Nothing to fire: jump instead of walking empty ticks. Slot indices depend only on the absolute
      // deadline, so the (empty) wheel needs no rearranging.
      this.#current = target;
      return 0;
    }
    let fired = 0;
    while (this.#current < target) {
      const tick = ++this.#current;
      if ((tick & SLOT_MASK) === 0) this.#cascade(tick, 1);
      const slot = tick & SLOT_MASK;
      let timer = this.#heads[slot] ?? null;
      // Detach the whole list first, so timers scheduled from `fire` for this same tick go to the next one.
      this.#heads[slot] = null;
      this.#tails[slot] = null;
      while (timer) {
        const next = timer.next;
        timer.slot = -1;
        timer.next = null;
        timer.prev = null;
        this.#size--;
        fired++;
        fire(timer.value, timer);
        timer = next;
      }
      if (this.#size === 0) {
        this.#current = target;
        break;
      }
    }
    return fired;
  }

  /**
   * The earliest time at which `advance` may have something to fire, or null when empty. Exact for
   * timers within 256 ticks; otherwise the next cascade point, which is early, never late.
   */
  nextDeadline(): number | null {
    if (this.#size === 0) return null;
    const base = this.#current;
    for (let i = 1; i <= SLOTS; i++) {
      const tick = base + i;
      if ((tick & SLOT_MASK) === 0) return this.#origin + tick * this.tickMs;
      if (this.#heads[tick & SLOT_MASK]) return this.#origin + tick * this.tickMs;
    }
    return this.#origin + (base + SLOTS) * this.tickMs;
  }

  /** Removes every timer, returning their values. */
  clear(): T[] {
    const out: T[] = [];
    for (let i = 0; i <= OVERFLOW; i++) {
      let timer = this.#heads[i] ?? null;
      while (timer) {
        out.push(timer.value);
        timer.slot = -1;
        const next = timer.next;
        timer.next = null;
        timer.prev = null;
        timer = next;
      }
      this.#heads[i] = null;
      this.#tails[i] = null;
    }
    this.#size = 0;
    return out;
  }

  #place(timer: WheelTimer<T>): void {
    const tick = timer.tick;
    const delta = tick - this.#current;
    let index: number;
    if (delta < SPAN[0]) index = tick & SLOT_MASK;
    else if (delta < SPAN[1]) index = SLOTS + ((tick / SPAN[0]) & SLOT_MASK);
    else if (delta < SPAN[2]) index = 2 * SLOTS + ((tick / SPAN[1]) & SLOT_MASK);
    else if (delta < SPAN[3]) index = 3 * SLOTS + ((tick / SPAN[2]) & SLOT_MASK);
    else index = OVERFLOW;
    timer.slot = index;
    const tail = this.#tails[index] ?? null;
    timer.prev = tail;
    timer.next = null;
    if (tail) tail.next = timer;
    else this.#heads[index] = timer;
    this.#tails[index] = timer;
  }

  #unlink(timer: WheelTimer<T>): void {
    const index = timer.slot;
    if (timer.prev) timer.prev.next = timer.next;
    else this.#heads[index] = timer.next;
    if (timer.next) timer.next.prev = timer.prev;
    else this.#tails[index] = timer.prev;
    timer.slot = -1;
    timer.next = null;
    timer.prev = null;
  }

  /** At a level-`level` boundary: move the due slot of that level (and higher first, if needed) down. */
  #cascade(tick: number, level: number): void {
    const slot = (tick / SPAN[level - 1]!) & SLOT_MASK;
    if (slot === 0) {
      if (level < LEVELS - 1) this.#cascade(tick, level + 1);
      else this.#redistribute(OVERFLOW);
    }
    this.#redistribute(level * SLOTS + slot);
  }

  #redistribute(index: number): void {
    let timer = this.#heads[index] ?? null;
    this.#heads[index] = null;
    this.#tails[index] = null;
    while (timer) {
      const next = timer.next;
      this.#place(timer);
      timer = next;
    }
  }
}
