import { readKeyDays, SCORE_BUCKETS } from "../db/publishableKeyStats.ts";
import { findPublishableKeyById } from "../db/publishableKeys.ts";
import type { TxDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import { dayOf } from "./minutes.ts";

/**
 * The abuse view of a publishable key, for operators: per day (UTC) the attempts, the calls started,
 * the refusals by error code and the minutes kept; over the period the bot check's scores and the
 * origins refused most. Read from the per-day rows counted at each attempt (webCalls.ts), so 90 days
 * cost 90 rows.
 */

const TOP_ORIGINS = 10;

export interface KeyStats {
  days: {
    date: string;
    attempts: number;
    started: number;
    refused: Record<string, number>;
    minutes: number;
  }[];
  captchaScores: number[];
  topRefusedOrigins: { origin: string; count: number }[];
}

export async function publishableKeyStats(deps: TxDeps, id: string, days: number): Promise<KeyStats> {
  if (!isId(id, "key") || !(await findPublishableKeyById(deps.sql, id))) throw notFound("publishable key");
  const today = Date.parse(dayOf(deps.clock.now()));
  const dates = Array.from({ length: days }, (_, i) => dayOf(new Date(today - (days - 1 - i) * 86_400_000)));
  const rows = new Map((await readKeyDays(deps.sql, id, dates[0]!)).map((r) => [r.day, r]));
  const captchaScores = Array<number>(SCORE_BUCKETS).fill(0);
  const origins = new Map<string, number>();
  for (const r of rows.values()) {
    r.captcha_scores.forEach((n, i) => {
      captchaScores[i] = (captchaScores[i] ?? 0) + n;
    });
    for (const [origin, n] of Object.entries(r.refused_origins))
      origins.set(origin, (origins.get(origin) ?? 0) + n);
  }
  return {
    days: dates.map((date) => {
      const r = rows.get(date);
      return {
        date,
        attempts: r?.attempts ?? 0,
        started: r?.started ?? 0,
        refused: r?.refused ?? {},
        minutes: r?.minutes ?? 0,
      };
    }),
    captchaScores,
    topRefusedOrigins: [...origins]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .slice(0, TOP_ORIGINS)
      .map(([origin, count]) => ({ origin, count })),
  };
}
