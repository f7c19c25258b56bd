import { toHex } from "../bytes.ts";
import type { Logger } from "../log.ts";
import { Coalescer, logRefusedBatch, STATEMENT_COALESCING } from "./engine/coalesce.ts";
import { type Db, refusedByDatabase } from "./engine/connection.ts";
import { hitRow, type RateLimitRow, rateLimitHitsSql } from "./rateLimits.ts";
import { claimSql } from "./sessionTokens.ts";
import { firstStepTimers, insertSimulatedCallsFrom, type TimerInsert } from "./simulatedCalls.ts";

/**
 * The redemption of a test session token, in one statement and so one round trip and one commit: the
 * request's rate-limit hit, then, when it passed, the claim (a test token whose agent is active), the
 * simulated web call it starts and the call's first timer. Under load, redemptions that arrive together
 * share one such statement (`testTokenRedemptions`).
 */

export interface TestTokenRedemption {
  hash: Uint8Array;
  callId: string;
  /** The client address the request's hit counts against, and when the request arrived. */
  address: string;
  hitAt: Date;
  /** The moment of the claim (expiry check, `spent_at`, the call's `created_at`). */
  now: Date;
  /** The simulated call's drawn duration. */
  durationSeconds: number;
}

/** The hit's row, and the first timer of the call when the claim took the token (else null). */
export type TestTokenRedemptionRow<T> = RateLimitRow & { timers: T[] | null };

export interface RedemptionSettings {
  rule: { bucket: string; limit: number; windowSeconds: number };
  timer: { kind: string; delayMs: number; insert: TimerInsert };
}

/** One redemption's statement. */
async function redeemOne<T>(
  sql: Db,
  settings: RedemptionSettings,
  r: TestTokenRedemption,
): Promise<TestTokenRedemptionRow<T>> {
  const hit = hitRow(sql, r.address, r.hitAt);
  const allowed = sql`(select last_allowed from rate_limit)`;
  const { timer } = settings;
  const [row] = await sql<TestTokenRedemptionRow<T>[]>`
    with rate_limit as (${rateLimitHitsSql(sql, settings.rule, hit)}),
      claim as (${claimSql(sql, r.hash, r.now, { callId: r.callId, livemode: false, onlyIf: allowed })}),
      created_call as (${insertSimulatedCallsFrom(
        sql,
        sql`
          select ${r.callId}::text as id, c.organization_id, c.agent_id, null as to_number, null as contact_id,
            null as campaign_id, 'web' as direction, c.variables, ${r.durationSeconds}::integer as simulated_duration_seconds,
            c.language, ${r.now}::timestamptz as created_at
          from claim c`,
      )}),
      created_timer as (${timer.insert(sql, firstStepTimers(sql, timer.kind, sql`created_call`, timer.delayMs))})
    select (select json_agg(created_timer) from created_timer) as timers, rate_limit.hits, rate_limit.last_allowed
    from rate_limit`;
  return row!;
}

/**
 * Several redemptions in one statement, each row of `input` doing what `redeemOne` does for its
 * request: its own hit (addresses are distinct within a statement), its claim gated on that hit and its
 * call. Answers in the order of `rs`.
 */
async function redeemMany<T>(
  sql: Db,
  settings: RedemptionSettings,
  rs: readonly TestTokenRedemption[],
): Promise<TestTokenRedemptionRow<T>[]> {
  const input = rs.map((r, i) => ({
    i,
    hash: toHex(r.hash),
    call_id: r.callId,
    address: r.address,
    hit_at: r.hitAt.toISOString(),
    at: r.now.toISOString(),
    duration: r.durationSeconds,
  }));
  const hash = sql`decode(r.hash, 'hex')`;
  const { timer } = settings;
  const rows = await sql<(TestTokenRedemptionRow<T> & { i: number })[]>`
    with input as (
        select r.* from batch_rows(${sql.json(input as never)}::json) e
          cross join lateral json_to_record(e) as r(i integer, hash text, call_id text, address text,
            hit_at timestamptz, at timestamptz, duration integer)
      ),
      rate_limit as (${rateLimitHitsSql(sql, settings.rule, sql`select address, hit_at as at from input`)}),
      allowed as (select r.* from input r join rate_limit l on l.address = r.address where l.last_allowed),
      claim as (${claimSql(sql, hash, sql`r.at`, { callId: sql`r.call_id`, livemode: false, from: sql`allowed r` })}),
      created_call as (${insertSimulatedCallsFrom(
        sql,
        sql`
          select c.call_id as id, c.organization_id, c.agent_id, null as to_number, null as contact_id,
            null as campaign_id, 'web' as direction, c.variables, r.duration as simulated_duration_seconds,
            c.language, r.at as created_at
          from claim c join input r on r.call_id = c.call_id`,
      )}),
      created_timer as (${timer.insert(sql, firstStepTimers(sql, timer.kind, sql`created_call`, timer.delayMs))})
    select r.i, l.hits, l.last_allowed,
      (select json_agg(t) from created_timer t where t.payload->>'callId' = r.call_id) as timers
    from input r join rate_limit l on l.address = r.address
    order by r.i`;
  return rows;
}

/**
 * Redemptions of test tokens, coalesced (engine/coalesce.ts). A statement holds one request per client
 * address (an upsert touches its row once) and per token (the second redeemer of a token goes in
 * another statement, whose claim then waits on the first one's row lock and finds the token spent).
 */
export type TestTokenRedemptions<T = unknown> = Coalescer<TestTokenRedemption, TestTokenRedemptionRow<T>>;

export function testTokenRedemptions<T>(
  sql: Db,
  log: Logger,
  settings: RedemptionSettings,
): TestTokenRedemptions<T> {
  return new Coalescer<TestTokenRedemption, TestTokenRedemptionRow<T>>(
    (r) => redeemOne<T>(sql, settings, r),
    (rs) => redeemMany<T>(sql, settings, rs),
    {
      ...STATEMENT_COALESCING,
      refusedByDatabase,
      onRefused: logRefusedBatch(log, "test-token redemptions"),
      keys: (r) => [`address ${r.address}`, `token ${toHex(r.hash)}`],
    },
  );
}
