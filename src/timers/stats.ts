import { LatencyHistogram } from "./histogram.ts";

/** What a timer runner reports about itself (its `stats()`), for operators and benchmarks. */
export interface RunnerStats {
  runner: number;
  fired: number;
  /** Firing transactions committed (fired ÷ transactions = the mean batch). */
  transactions: number;
  failures: number;
  held: number;
  latenessMs: Quantiles;
  /**
   * Where the lateness goes: the wheel's wake-up after the due time (event-loop delay), the wait for
   * a free firing slot, and the firing transaction itself (begin to commit).
   */
  breakdownMs: { wake: Quantiles; queue: Quantiles; transaction: Quantiles };
}

export interface Quantiles {
  p50: number;
  p99: number;
  max: number;
}

const quantiles = (h: LatencyHistogram): Quantiles => ({
  p50: h.quantile(0.5),
  p99: h.quantile(0.99),
  max: h.max,
});

/** The counters and histograms a runner keeps while it fires. */
export class RunnerStatistics {
  readonly lateness = new LatencyHistogram();
  readonly wakeDelay = new LatencyHistogram();
  readonly queueWait = new LatencyHistogram();
  readonly transactionTime = new LatencyHistogram();
  fired = 0;
  transactions = 0;
  failures = 0;

  report(runner: number, held: number): RunnerStats {
    return {
      runner,
      fired: this.fired,
      transactions: this.transactions,
      failures: this.failures,
      held,
      latenessMs: quantiles(this.lateness),
      breakdownMs: {
        wake: quantiles(this.wakeDelay),
        queue: quantiles(this.queueWait),
        transaction: quantiles(this.transactionTime),
      },
    };
  }
}
