import { keyKind, sha256 } from "../auth/keys.ts";
import { verifyCaptcha } from "../captcha/verify.ts";
import type { AgentRow } from "../db/agents.ts";
import { pipelinedTransaction, settledAll } from "../db/engine/connection.ts";
import { countKeyAttempt, countStartFailure } from "../db/publishableKeyStats.ts";
import { findPublishableKeyByHash, type PublishableKeyRow } from "../db/publishableKeys.ts";
import { readValidToken } from "../db/sessionTokens.ts";
import type { InsertedTimerRow } from "../db/timers.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import type { WebCallRoom } from "../livekit/client.ts";
import { drawDurationSeconds } from "../simulation/content.ts";
import { assertAgentAvailable, assertPaidPlan } from "./admission.ts";
import { type PreparedCall, prepareLiveCall, startRoom } from "./liveCalls.ts";
import { dayOf } from "./minutes.ts";
import type { WebCallRateLimit } from "./rateLimit.ts";
import {
  claimRefusalOf,
  invalidSessionToken,
  presentedHash,
  withRedeemedSessionToken,
} from "./sessionTokens.ts";

/**
 * Starting web calls: the publishable-key form (from a website, with a bot check) and the session-token
 * form. The rate limit and CORS run before this, in the route's gate (http/webCallGate.ts); a live call
 * then follows its life in services/liveCalls.ts.
 */

export type LiveWebCall = {
  callId: string;
  livemode: true;
  maxSeconds: number;
  room: WebCallRoom;
};
export type SimulatedWebCall = { simulated: true; livemode: false; callId: string; maxSeconds: number };
export type StartedWebCall = LiveWebCall | SimulatedWebCall;

/**
 * 401 `invalid_key` unless `value` is a publishable key that exists and is not revoked. A revoked key's
 * refusal counts in its abuse view; an unknown one is nobody's and costs nothing more.
 */
async function findPublishableKey(
  deps: Deps,
  value: unknown,
  origin: string | undefined,
): Promise<PublishableKeyRow> {
  if (typeof value !== "string" || keyKind(value) !== "publishable") throw invalidKey();
  const row = await findPublishableKeyByHash(deps.sql, sha256(value));
  if (!row) throw invalidKey();
  if (row.revoked_at) {
    const err = invalidKey();
    await countRefusal(deps, { id: row.id }, err, origin, null);
    throw err;
  }
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
 * Publishable form: rate limit (429) → key (401) → Origin in the key's list (403) → bot check (400) →
 * paid plan (403) → agent (503) → plan minutes (403) → key cap (429) → start.
 *
 * Every attempt with a key that exists is counted in the key's abuse view (db/publishableKeyStats.ts):
 * a refusal under its code, by one statement once it is decided (a revoked key's under `invalid_key`);
 * a start inside the transaction that creates the call, moved under `call_start_failed` when the media
 * server then fails it. The rate limit decides before the key is read: a rate-limited attempt counts
 * too, under `rate_limited`, when the body carries a key that exists, revoked or not (the statement
 * reads the key itself).
 */
export async function startWithPublishableKey(
  deps: Deps,
  input: { publishableKey: unknown; captchaToken: unknown; origin: string | undefined; remoteIp: string },
  rateLimit: WebCallRateLimit,
): Promise<LiveWebCall> {
  await settleRateLimit(deps, rateLimit, input);
  const key = await findPublishableKey(deps, input.publishableKey, input.origin);
  const seen: { captchaScore: number | null } = { captchaScore: null };
  let admitted: { agent: AgentRow; call: PreparedCall; countedAt: Date };
  try {
    admitted = await admitPublishableCall(deps, key, input, seen);
  } catch (err) {
    if (err instanceof ApiError)
      await countRefusal(deps, { id: key.id }, err, input.origin, seen.captchaScore);
    throw err;
  }
  try {
    return await startRoom(deps, admitted.agent, admitted.call, {});
  } catch (err) {
    if (err instanceof ApiError) {
      await countStartFailure(deps.sql, key.id, dayOf(admitted.countedAt), refusedOrigin(input.origin)).catch(
        (e) =>
          deps.log.warn("a failed start could not be counted in the key's abuse view", {
            error: (e as Error).message,
          }),
      );
    }
    throw err;
  }
}

/**
 * A publishable-form request refused before its checks (a malformed body: 400 `invalid_request`) is an
 * attempt too: after the rate limit, which refuses it first if it must, it counts under `refusal`'s code
 * in the abuse view of the key it carries, when that key exists (the statement reads it). Throws.
 */
export async function refuseMalformedAttempt(
  deps: Deps,
  input: { publishableKey: unknown; origin: string | undefined },
  rateLimit: WebCallRateLimit,
  refusal: ApiError,
): Promise<never> {
  await settleRateLimit(deps, rateLimit, input);
  await countPresentedKeyRefusal(deps, input, refusal);
  throw refusal;
}

/**
 * The rate limit decides before the key is read; its refusal counts in the abuse view of the key the
 * body carries, when that key exists, revoked or not (the statement reads the key itself).
 */
async function settleRateLimit(
  deps: Deps,
  rateLimit: WebCallRateLimit,
  input: { publishableKey: unknown; origin: string | undefined },
): Promise<void> {
  try {
    await rateLimit.settle();
  } catch (err) {
    if (err instanceof ApiError) await countPresentedKeyRefusal(deps, input, err);
    throw err;
  }
}

/** A refusal counted for the publishable key a body carries, if it is one that exists (the statement reads it). */
async function countPresentedKeyRefusal(
  deps: Deps,
  input: { publishableKey: unknown; origin: string | undefined },
  refusal: ApiError,
): Promise<void> {
  const presented = input.publishableKey;
  if (typeof presented === "string" && keyKind(presented) === "publishable") {
    await countRefusal(deps, { hash: sha256(presented) }, refusal, input.origin, null);
  }
}

/**
 * The checks after the key, then the call's transaction, which also counts the start. The bot check's
 * score is left in `seen` for the count of a refusal.
 */
async function admitPublishableCall(
  deps: Deps,
  key: PublishableKeyRow,
  input: { captchaToken: unknown; origin: string | undefined; remoteIp: string },
  seen: { captchaScore: number | null },
): Promise<{ agent: AgentRow; call: PreparedCall; countedAt: Date }> {
  const origin = originOf(input.origin);
  if (!origin || !key.allowed_origins.includes(origin)) {
    throw new ApiError("origin_not_allowed", "This website is not allowed to use this key.");
  }
  const captcha = await verifyCaptcha(deps, {
    token: input.captchaToken,
    remoteIp: input.remoteIp,
    origin: input.origin,
  });
  seen.captchaScore = captcha.score ?? null;
  if (!captcha.ok) {
    deps.log.info("web call refused by the bot check", { reason: captcha.reason });
    throw new ApiError("invalid_captcha", "The bot check failed. Reload the page and try again.");
  }
  // Read together; the plan's refusal comes first.
  const [, agent] = await settledAll([
    assertPaidPlan(deps.sql, key.organization_id),
    assertAgentAvailable(deps.sql, key.organization_id, key.agent_id, {
      livemode: true,
      mediaServerConfigured: deps.liveKit !== null,
    }),
  ] as const);
  const callId = deps.ids.next("call");
  const countedAt = deps.clock.now();
  const call = await pipelinedTransaction(deps.sql, async (tx) => {
    const prepared = await prepareLiveCall(tx, deps, {
      callId,
      organizationId: key.organization_id,
      agent,
      variables: {},
      publishableKeyId: key.id,
    });
    await countKeyAttempt(
      tx,
      { id: key.id },
      {
        at: countedAt,
        outcome: { started: true, minutes: Math.ceil(prepared.maxSeconds / 60) },
        captchaScore: seen.captchaScore,
      },
    );
    return prepared;
  });
  return { agent, call, countedAt };
}

/** The longest Origin kept in a key's abuse view; a longer header is cut there. */
const ORIGIN_MAX = 255;

/** How a refused attempt's `Origin` header is kept in the key's abuse view. */
function refusedOrigin(origin: string | undefined): string {
  return origin === undefined ? "(none)" : origin.slice(0, ORIGIN_MAX);
}

/**
 * Counts a refused attempt in the key's abuse view. A failure to count is logged, never answered: the
 * caller gets its refusal.
 */
async function countRefusal(
  deps: Deps,
  key: { id: string } | { hash: Uint8Array },
  refusal: ApiError,
  origin: string | undefined,
  captchaScore: number | null,
): Promise<void> {
  try {
    await countKeyAttempt(deps.sql, key, {
      at: deps.clock.now(),
      outcome: { refused: refusal.code, origin: refusedOrigin(origin) },
      captchaScore,
    });
  } catch (err) {
    deps.log.warn("could not count a refused web call in the key's abuse view", {
      code: refusal.code,
      error: (err as Error).message,
    });
  }
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
  deps: Deps,
  token: unknown,
  rateLimit: WebCallRateLimit,
): Promise<StartedWebCall> {
  const hash = presentedHash(token);
  if (!hash) throw invalidSessionToken();
  const callId = deps.ids.next("call");
  const simulated = await startSimulatedWebCall(deps, hash, callId, rateLimit);
  if (simulated !== "live") return simulated;

  const { session, prepared } = await withRedeemedSessionToken(
    deps.sql,
    token,
    deps.clock,
    async (tx, s) => {
      const [, agent] = await settledAll([
        assertPaidPlan(tx, s.organizationId),
        assertAgentAvailable(tx, s.organizationId, s.agentId, {
          livemode: true,
          mediaServerConfigured: deps.liveKit !== null,
        }),
      ] as const);
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
  return startRoom(deps, prepared.agent, prepared.call, session.variables);
}

/**
 * A test token in one statement (db/webCallRedemptions.ts): the request's rate-limit hit, then, when it
 * passed, the claim, the simulated call and its first timer. When the claim took nothing, a read of
 * what the token is then tells why: "live" sends it on to the live path (the hit is counted: that path
 * does not count it again); a valid test token whose agent is inactive is 503; anything else is 401,
 * including a token that a parallel request spent first.
 */
async function startSimulatedWebCall(
  deps: Deps,
  hash: Uint8Array,
  callId: string,
  rateLimit: WebCallRateLimit,
): Promise<SimulatedWebCall | "live"> {
  const now = deps.clock.now();
  const { address, at } = rateLimit.hit;
  const row = await deps.batches.testTokenRedemptions.run({
    hash,
    callId,
    address,
    hitAt: at,
    now,
    durationSeconds: drawDurationSeconds(callId),
  });
  // Throws 429 when the hit was refused; then nothing else was done (every entry waits on the hit).
  rateLimit.counted(row);
  if (row.timers) {
    deps.timers.scheduled(row.timers as InsertedTimerRow[]);
    return { simulated: true, livemode: false, callId, maxSeconds: 600 };
  }
  const valid = await readValidToken(deps.sql, hash, now);
  if (valid?.livemode) return "live";
  throw claimRefusalOf(valid);
}
