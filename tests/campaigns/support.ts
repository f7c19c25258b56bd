import type { Sql } from "postgres";
import type { TestContext } from "../helpers/app.ts";

export const CAMPAIGN_KEYS = [
  "agentId",
  "completedAt",
  "concurrency",
  "createdAt",
  "id",
  "livemode",
  "maxAttempts",
  "name",
  "progress",
  "retryDelaySeconds",
  "startedAt",
  "status",
  "updatedAt",
];

export interface Progress {
  total: number;
  pending: number;
  inProgress: number;
  completed: number;
  succeeded: number;
  failed: number;
  cancelled: number;
}

/** `count` phone numbers, distinct, in E.164. */
export function phones(count: number): { phone: string }[] {
  return Array.from({ length: count }, (_, i) => ({ phone: `+3361234${String(i).padStart(4, "0")}` }));
}

export async function createCampaign(ctx: TestContext, key: string, json: Record<string, unknown>) {
  return ctx.request("/api/v1/campaigns", { method: "POST", key, json });
}

/**
 * The invariants every progress snapshot holds: completed = succeeded + failed, inProgress ≤
 * concurrency, and pending + inProgress + completed + cancelled = total.
 */
export function checkProgress(p: Progress, concurrency: number): void {
  if (p.completed !== p.succeeded + p.failed)
    throw new Error(`completed ≠ succeeded + failed: ${JSON.stringify(p)}`);
  if (p.inProgress > concurrency) throw new Error(`inProgress > concurrency: ${JSON.stringify(p)}`);
  if (p.total !== p.pending + p.inProgress + p.completed + p.cancelled)
    throw new Error(`counters do not add up to total: ${JSON.stringify(p)}`);
}

/** Counters that must never go down between two snapshots. */
export function checkMonotonic(before: Progress, after: Progress): void {
  for (const k of ["total", "completed", "succeeded", "failed", "cancelled"] as const) {
    if (after[k] < before[k]) throw new Error(`${k} went down: ${before[k]} → ${after[k]}`);
  }
}

/** Calls of a campaign that are not over yet, straight from the calls table. */
export async function openCalls(sql: Sql, campaignId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from calls where campaign_id = ${campaignId}
      and status not in ('completed', 'failed', 'no_answer', 'busy', 'cancelled')`;
  return row!.n;
}

export async function campaignEvents(sql: Sql, campaignId: string) {
  return sql<{ type: string; livemode: boolean; data: Record<string, unknown> }[]>`
    select type, livemode, data from events where type like 'campaign.%' and data->>'id' = ${campaignId}
    order by id`;
}
