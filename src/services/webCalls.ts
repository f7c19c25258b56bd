import { keyKind, sha256, toHex } from "../auth/keys.ts";
import { verifyCaptcha } from "../captcha/verify.ts";
import type { AgentRow } from "../db/agents.ts";
import { type CallRow, type CallStatus, callView, insertCall, moveCall } from "../db/calls.ts";
import { Coalescer, logRefusedBatch, onePer, STATEMENT_COALESCING } from "../db/engine/coalesce.ts";
import { type Db, pipelinedTransaction, refusedByDatabase } from "../db/engine/connection.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { newId } from "../ids.ts";
import { type LiveKit, LiveKitError, liveKitAgentName, type WebCallRoom } from "../livekit/client.ts";
import { drawDurationSeconds } from "../simulation/content.ts";
import type { FiredTimer, HandlerContext, TimerHandler } from "../timers/runner.ts";
import { type InsertedTimerRow, schedulerOf } from "../timers/scheduler.ts";
import { simulatedCallEntries, simulatedCallsFrom } from "./calls.ts";
import { recordEvent } from "./events.ts";
import { reserveMinutes, settleReservation } from "./minutes.ts";
import {
  type RateLimitRow,
  rateLimitHitsSql,
  WEB_CALL_RATE_LIMIT,
  type WebCallRateLimit,
} from "./rateLimit.ts";
import {
  assertAgentAvailable,
  assertPaidPlan,
  claimRefusalOf,
  claimSql,
  invalidSessionToken,
  presentedHash,
  readValidToken,
  withRedeemedSessionToken,
} from "./sessions.ts";

/**
 * Starting web calls (SPEC.md "POST /api/v1/web-calls", CONTRACT.md §4) and following live ones to
 * their end: the `maxSeconds` timer and LiveKit's webhooks. The rate limit and CORS run before this,
 * in the route's gate (http/webCallGate.ts).
 */

export type WebCallDeps = Pick<Deps, "sql" | "clock" | "env" | "log" | "timers">;

/** Timer kind that closes a live web call at its `maxSeconds`. */
export const WEB_CALL_MAX_DURATION_TIMER = "webcall.max_duration";

export type LiveWebCall = {
  callId: string;
  livemode: true;
  maxSeconds: number;
  room: WebCallRoom;
};
export type SimulatedWebCall = { simulated: true; livemode: false; callId: string; maxSeconds: number };
export type StartedWebCall = LiveWebCall | SimulatedWebCall;

interface PublishableKeyRow {
  id: string;
  organization_id: string;
  agent_id: string;
  allowed_origins: string[];
}

/** 401 `invalid_key` unless `value` is a publishable key that exists and is not revoked. */
async function findPublishableKey(sql: Db, value: unknown): Promise<PublishableKeyRow> {
  if (typeof value !== "string" || keyKind(value) !== "publishable") throw invalidKey();
  const [row] = await sql<PublishableKeyRow[]>`
    select id, organization_id, agent_id, allowed_origins from publishable_keys
    where key_hash = ${sha256(value)} and revoked_at is null`;
  if (!row) throw invalidKey();
  return row;
}

function invalidKey() {
  return new ApiError("invalid_key", "The publishable key is wrong or revoked.");
}

/** The origin of an `Origin` header (scheme, host, port), or null when there is none usable. */
function originOf(header: string | undefined): string | null {
  if (!header || header === "null") return null;
  try {
    const url = new URL(header);
    return url.protocol === "https:" || url.protocol === "http:" ? url.origin : null;
  } catch {
    return null;
  }
}

/**
 * Publishable form: key (401) → Origin in the key's list (403) → bot check (400) → paid plan (403) →
 * agent (503) → plan minutes (403) → key cap (429) → start.
 */
export async function startWithPublishableKey(
  deps: WebCallDeps,
  liveKit: LiveKit | null,
  input: { publishableKey: unknown; captchaToken: unknown; origin: string | undefined; remoteIp: string },
): Promise<LiveWebCall> {
  const key = await findPublishableKey(deps.sql, input.publishableKey);
  const origin = originOf(input.origin);
  if (!origin || !key.allowed_origins.includes(origin)) {
    throw new ApiError("origin_not_allowed", "This website is not allowed to use this key.");
  }
  const captcha = await verifyCaptcha(deps, {
    token: input.captchaToken,
    remoteIp: input.remoteIp,
    origin: input.origin,
  });
  if (!captcha.ok) {
    deps.log.info("web call refused by the bot check", { reason: captcha.reason });
    throw new ApiError("invalid_captcha", "The bot check failed. Reload the page and try again.");
  }
  await assertPaidPlan(deps.sql, key.organization_id);
  const agent = await assertAgentAvailable(deps.sql, key.organization_id, key.agent_id, {
    livemode: true,
    mediaServerConfigured: liveKit !== null,
  });
  const callId = newId("call", deps.clock);
  const prepared = (await pipelinedTransaction(deps.sql, (tx) =>
    prepareLiveCall(tx, deps, {
      callId,
      organizationId: key.organization_id,
      agent,
      variables: {},
      publishableKeyId: key.id,
    }),
  )) as PreparedCall;
  return startRoom(deps, liveKit!, agent, prepared, {});
}

/**
 * Session form: token (401) → paid plan (live only) → agent (503) → plan minutes (403) → start. One
 * claim decides among parallel requests; a refusal leaves the token valid. A failure while starting
 * comes after the commit: the token stays spent.
 *
 * A test token is settled by one statement (`startSimulatedWebCall`). A live one then goes through the
 * transaction that spends it: the checks run after its claim, and a refusal rolls the claim back.
 */
export async function startWithSessionToken(
  deps: WebCallDeps,
  liveKit: LiveKit | null,
  token: unknown,
  rateLimit: WebCallRateLimit,
): Promise<StartedWebCall> {
  const hash = presentedHash(token);
  if (!hash) throw invalidSessionToken();
  const callId = newId("call", deps.clock);
  const simulated = await startSimulatedWebCall(deps, hash, callId, rateLimit);
  if (simulated !== "live") return simulated;

  const { session, prepared } = await withRedeemedSessionToken(
    deps.sql,
    token,
    deps.clock,
    async (tx, s) => {
      await assertPaidPlan(tx, s.organizationId);
      const agent = await assertAgentAvailable(tx, s.organizationId, s.agentId, {
        livemode: true,
        mediaServerConfigured: liveKit !== null,
      });
      const call = await prepareLiveCall(tx, deps, {
        callId,
        organizationId: s.organizationId,
        agent,
        variables: s.variables,
        publishableKeyId: null,
      });
      return { agent, call };
    },
    { callId, livemode: true },
  );
  return startRoom(deps, liveKit!, prepared.agent, prepared.call, session.variables);
}

/**
 * A test token in one statement, so one round trip and one commit: the request's rate-limit hit, then,
 * when it passed, the claim (a test token whose agent is active), the simulated call it starts and the
 * call's first timer. When the claim took nothing, a read of what the token is then tells why: "live"
 * sends it on to the live path (the hit is counted: that path does not count it again); a valid test
 * token whose agent is inactive is 503; anything else is 401, including a token that a parallel
 * request spent first.
 *
 * Under load, redemptions that arrive together share one such statement (`simulatedRedeems`).
 */
async function startSimulatedWebCall(
  deps: WebCallDeps,
  hash: Uint8Array,
  callId: string,
  rateLimit: WebCallRateLimit,
): Promise<SimulatedWebCall | "live"> {
  const now = deps.clock.now();
  const row = await simulatedRedeems(deps).run({ hash, callId, rateLimit, now });
  // Throws 429 when the hit was refused; then nothing else was done (every entry waits on the hit).
  rateLimit.counted(row);
  if (row.timers) {
    schedulerOf(deps).scheduled(row.timers);
    return { simulated: true, livemode: false, callId, maxSeconds: 600 };
  }
  const valid = await readValidToken(deps.sql, hash, now);
  if (valid?.livemode) return "live";
  throw claimRefusalOf(valid);
}

interface SimulatedRedeem {
  hash: Uint8Array;
  callId: string;
  rateLimit: WebCallRateLimit;
  now: Date;
}

/** The hit's row, and the first timer of the call when the claim took the token. */
type SimulatedRedeemRow = RateLimitRow & { timers: InsertedTimerRow[] | null };

/** One redemption's statement (see `startSimulatedWebCall`). */
async function redeemSimulated(deps: WebCallDeps, r: SimulatedRedeem): Promise<SimulatedRedeemRow> {
  const { sql } = deps;
  const allowed = sql`(select last_allowed from rate_limit)`;
  const claimed = sql`
    select organization_id, agent_id, variables, language from claim`;
  const [row] = await sql<SimulatedRedeemRow[]>`
    with rate_limit as (${r.rateLimit.inStatement()}),
      claim as (${claimSql(sql, r.hash, r.now, { callId: r.callId, livemode: false, onlyIf: allowed })}),
      ${simulatedCallEntries(sql, deps, { id: r.callId, direction: "web", to: null }, claimed)}
    select (select json_agg(created_timer) from created_timer) as timers, rate_limit.hits, rate_limit.last_allowed
    from rate_limit`;
  return row!;
}

/**
 * Several redemptions in one statement, each row of `input` doing what `redeemSimulated` does for its
 * request: its own hit (addresses are distinct within a statement), its claim gated on that hit and
 * its call. Answers in the order of `rs`.
 */
async function redeemSimulatedMany(deps: WebCallDeps, rs: SimulatedRedeem[]): Promise<SimulatedRedeemRow[]> {
  const { sql } = deps;
  const input = rs.map((r, i) => ({
    i,
    hash: toHex(r.hash),
    call_id: r.callId,
    address: r.rateLimit.hit.address,
    hit_at: r.rateLimit.hit.at.toISOString(),
    at: r.now.toISOString(),
    duration: drawDurationSeconds(r.callId),
  }));
  const hash = sql`decode(r.hash, 'hex')`;
  const rows = await sql<(SimulatedRedeemRow & { i: number })[]>`
    with input as (
        select r.* from batch_rows(${sql.json(input)}::json) e
          cross join lateral json_to_record(e) as r(i integer, hash text, call_id text, address text,
            hit_at timestamptz, at timestamptz, duration integer)
      ),
      rate_limit as (${rateLimitHitsSql(sql, WEB_CALL_RATE_LIMIT, sql`select address, hit_at as at from input`)}),
      allowed as (select r.* from input r join rate_limit l on l.address = r.address where l.last_allowed),
      claim as (${claimSql(sql, hash, sql`r.at`, { callId: sql`r.call_id`, livemode: false, from: sql`allowed r` })}),
      ${simulatedCallsFrom(
        sql,
        deps,
        sql`
          select c.call_id as id, c.organization_id, c.agent_id, null as to_number, null as contact_id,
            null as campaign_id, 'web' as direction, c.variables, r.duration as simulated_duration_seconds,
            c.language, r.at as created_at
          from claim c join input r on r.call_id = c.call_id`,
      )}
    select r.i, l.hits, l.last_allowed,
      (select json_agg(t) from created_timer t where t.payload->>'callId' = r.call_id) as timers
    from input r join rate_limit l on l.address = r.address
    order by r.i`;
  return rows;
}

/**
 * Redemptions of test tokens, coalesced (db/coalesce.ts). A statement holds one request per client
 * address (an upsert touches its row once) and per token (the second redeemer of a token goes in
 * another statement, whose claim then waits on the first one's row lock and finds the token spent).
 */
const simulatedRedeems = onePer(
  (deps: WebCallDeps) =>
    new Coalescer<SimulatedRedeem, SimulatedRedeemRow>(
      (r) => redeemSimulated(deps, r),
      (rs) => redeemSimulatedMany(deps, rs),
      {
        ...STATEMENT_COALESCING,
        refusedByDatabase,
        onRefused: logRefusedBatch(deps.log, "test-token redemptions"),
        keys: (r) => [`address ${r.rateLimit.hit.address}`, `token ${toHex(r.hash)}`],
      },
    ),
);

interface PreparedCall {
  callId: string;
  maxSeconds: number;
  timerId: string;
}

/**
 * Inside the start transaction: reserve the minutes (which decides `maxSeconds`), write the live call
 * and the timer that ends it, so either all of them exist or none does.
 */
async function prepareLiveCall(
  tx: Db,
  deps: WebCallDeps,
  input: {
    callId: string;
    organizationId: string;
    agent: AgentRow;
    variables: Record<string, unknown>;
    publishableKeyId: string | null;
  },
): Promise<PreparedCall> {
  const { maxSeconds } = await reserveMinutes(tx, deps.clock, {
    callId: input.callId,
    organizationId: input.organizationId,
    livemode: true,
    publishableKeyId: input.publishableKeyId,
  });
  await insertCall(tx, {
    id: input.callId,
    organization_id: input.organizationId,
    livemode: true,
    status: "initiated",
    agent_id: input.agent.id,
    to_number: null,
    contact_id: null,
    campaign_id: null,
    direction: "web",
    variables: input.variables,
    simulated_duration_seconds: null,
    language: input.agent.language,
    task_id: null,
    created_at: deps.clock.now(),
  });
  const timer = await schedulerOf(deps).schedule(tx, {
    kind: WEB_CALL_MAX_DURATION_TIMER,
    delayMs: maxSeconds * 1000,
    payload: { callId: input.callId },
  });
  return { callId: input.callId, maxSeconds, timerId: timer.id };
}

/**
 * After the call is committed: the room and the agent's dispatch. A failure here is 502
 * `call_start_failed`; the call ends `failed`, its minutes go back and its timer is dropped (a
 * session token used for it stays spent).
 */
async function startRoom(
  deps: WebCallDeps,
  liveKit: LiveKit,
  agent: AgentRow,
  prepared: PreparedCall,
  variables: Record<string, unknown>,
): Promise<LiveWebCall> {
  try {
    const room = await liveKit.startWebCall({
      callId: prepared.callId,
      agentName: liveKitAgentName(agent),
      variables,
    });
    return { callId: prepared.callId, livemode: true, maxSeconds: prepared.maxSeconds, room };
  } catch (err) {
    deps.log.warn("web call could not start at the media server", {
      callId: prepared.callId,
      error: err instanceof LiveKitError ? err.message : "unexpected error",
    });
    await pipelinedTransaction(deps.sql, async (tx) => {
      const t = tx;
      const failed = await moveCall(t, prepared.callId, "initiated", "failed", {
        ended_at: deps.clock.now(),
      });
      if (failed) await settleReservation(t, deps.clock, prepared.callId, null);
      await schedulerOf(deps).cancel(t, prepared.timerId);
    });
    throw new ApiError("call_start_failed", "The call could not be started. Try again in a moment.");
  }
}

// ——— the end of live web calls ———

/**
 * Ends a live web call that is still `initiated` or `ongoing` (fenced on the status it was read in):
 * `ongoing` → `completed` with its real duration, `initiated` (nobody joined) → `no_answer`. Settles
 * the minutes in the same transaction and records `call.ended` once. Null when nothing moved.
 */
export async function endLiveWebCall(
  tx: Db,
  deps: Pick<Deps, "clock">,
  callId: string,
  at: Date,
): Promise<CallRow | null> {
  const [call] = await tx<{ status: CallStatus; started_at: Date | null; livemode: boolean }[]>`
    select status, started_at, livemode from calls where id = ${callId} and direction = 'web'`;
  if (!call?.livemode) return null;
  let moved: CallRow | null = null;
  let actualSeconds: number | null = null;
  if (call.status === "ongoing" && call.started_at) {
    actualSeconds = Math.max(0, Math.round((at.getTime() - call.started_at.getTime()) / 1000));
    moved = await moveCall(tx, callId, "ongoing", "completed", {
      ended_at: at,
      duration_seconds: actualSeconds,
    });
  } else if (call.status === "initiated") {
    moved = await moveCall(tx, callId, "initiated", "no_answer", { ended_at: at });
  }
  if (!moved) return null;
  await settleReservation(tx, deps.clock, callId, actualSeconds);
  await recordEvent(tx, deps.clock, {
    organizationId: moved.organization_id,
    type: "call.ended",
    livemode: true,
    data: callView(moved),
  });
  return moved;
}

/** A live web call becomes `ongoing` when the visitor or the agent joins; `call.started` once. */
export async function markLiveWebCallStarted(
  tx: Db,
  deps: Pick<Deps, "clock">,
  callId: string,
  at: Date,
): Promise<CallRow | null> {
  const [call] = await tx<{ livemode: boolean }[]>`
    select livemode from calls where id = ${callId} and direction = 'web'`;
  if (!call?.livemode) return null;
  const moved = await moveCall(tx, callId, "initiated", "ongoing", { started_at: at });
  if (!moved) return null;
  await recordEvent(tx, deps.clock, {
    organizationId: moved.organization_id,
    type: "call.started",
    livemode: true,
    data: callView(moved),
  });
  return moved;
}

/**
 * The `maxSeconds` timer: closes the room (everyone is disconnected) and ends the call. A call that
 * already ended changes nothing. A room LiveKit no longer knows is already closed; any other failure
 * to close it is thrown, so the runner tries again.
 */
export function webCallMaxDuration(deps: Pick<Deps, "clock" | "log">, liveKit: LiveKit | null): TimerHandler {
  return async ({ tx, timer }: HandlerContext) => {
    const callId = String((timer as FiredTimer).payload.callId);
    const [call] = await tx<{ status: CallStatus }[]>`select status from calls where id = ${callId}`;
    if (!call || (call.status !== "initiated" && call.status !== "ongoing")) return;
    if (liveKit) {
      try {
        await liveKit.deleteRoom(callId);
      } catch (err) {
        if (!/not.?found/i.test((err as Error).message)) throw err;
      }
    } else {
      deps.log.warn("web call reached its maximum duration but no media server is configured", { callId });
    }
    await endLiveWebCall(tx, deps, callId, timer.dueAt);
  };
}
