/**
 * Firing lateness in fixed buckets: 0.1 ms wide up to 100 ms, 10 ms wide up to 60 s, then one
 * overflow bucket. Constant memory and O(1) recording, whatever the number of timers.
 */
const FINE = 1000; // 0–100 ms by 0.1 ms
const COARSE = 6000; // 100 ms–60 s by 10 ms

export class LatencyHistogram {
  readonly #buckets = new Float64Array(FINE + COARSE + 1);
  #count = 0;
  #max = 0;

  record(ms: number): void {
    const v = Math.max(0, ms);
    const i = v < 100 ? Math.floor(v * 10) : Math.min(FINE + COARSE, FINE + Math.floor((v - 100) / 10));
    this.#buckets[i]! += 1;
    this.#count++;
    if (v > this.#max) this.#max = v;
  }

  get count(): number {
    return this.#count;
  }

  get max(): number {
    return Math.round(this.#max * 10) / 10;
  }

  /** Upper bound of the bucket holding quantile q (0–1), in ms. */
  quantile(q: number): number {
    if (this.#count === 0) return 0;
    const rank = Math.ceil(q * this.#count);
    let seen = 0;
    for (let i = 0; i < this.#buckets.length; i++) {
      seen += this.#buckets[i]!;
      if (seen >= rank) {
        const upper = i < FINE ? (i + 1) / 10 : 100 + (i - FINE + 1) * 10;
        return Math.min(Math.round(upper * 10) / 10, this.max);
      }
    }
    return this.max;
  }
}
