import type { Sql } from "postgres";
import type { Clock } from "../clock.ts";
import { type Db, pipelinedTransaction, settledAll } from "../db/engine/connection.ts";
import {
  addUsage,
  insertReservation,
  lockUsage,
  settleOpenReservation,
  subtractUsage,
  usageOf,
} from "../db/minutes.ts";
import { findOrganization } from "../db/organizations.ts";
import { returnKeyDayMinutes } from "../db/publishableKeyStats.ts";
import { monthlyMinuteCap } from "../db/publishableKeys.ts";
import { ApiError } from "../errors.ts";

/**
 * Live-call minutes: a publishable key's monthly cap and an organization's plan
 * minutes, both counted per calendar month in UTC. A call reserves the whole minutes of its
 * `maxSeconds` when it starts; when it ends, `ceil(actual / 60)` (at least 1) stays counted and the
 * rest is returned. Usage rows are locked while a reservation is decided, so parallel calls can
 * never reserve beyond a cap.
 */

/** The longest web call, whatever remains. */
export const MAX_CALL_SECONDS = 600;

/** First day of the calendar month (UTC) of `at`, as `YYYY-MM-01`. */
export function monthOf(at: Date): string {
  return `${at.getUTCFullYear()}-${String(at.getUTCMonth() + 1).padStart(2, "0")}-01`;
}

/** The calendar day (UTC) of `at`, as `YYYY-MM-DD`. */
export function dayOf(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** Whole seconds from `at` until the next calendar month (UTC) begins: the Retry-After of `minute_cap_reached`. */
export function secondsUntilNextMonth(at: Date): number {
  const next = Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1);
  return Math.max(1, Math.ceil((next - at.getTime()) / 1000));
}

/** 403 `plan_minutes_exhausted`: the organization's plan has no minute left this month. */
export function planMinutesExhausted(): ApiError {
  return new ApiError(
    "plan_minutes_exhausted",
    "The organization's plan minutes for this month are used up.",
  );
}

/** How long a call that may last `longest` seconds may last on `planRemaining` (> 0) plan minutes. */
export function planMaxSeconds(longest: number, planRemaining: number): number {
  return Math.min(longest, planRemaining * 60);
}

export interface ReserveInput {
  callId: string;
  organizationId: string;
  /** Live calls reserve plan minutes; simulated (test) calls reserve nothing. */
  livemode: boolean;
  /** Calls started with a publishable key also reserve on the key's monthly cap. */
  publishableKeyId?: string | null;
  /** The longest the call may last, whatever remains (default: a web call's 600 s). */
  maxSeconds?: number;
  /** The organization's allowance when the caller has just read it (else it is read here). */
  planMinutes?: number;
  /**
   * The plan minutes used this month when the caller holds the plan row's lock already (read under
   * it): nothing is read here then, so the writes go out with the caller's next statements.
   */
  planUsedLocked?: number;
}

export interface Reservation {
  maxSeconds: number;
  reservedMinutes: number;
}

/**
 * Decides `maxSeconds` and reserves its minutes, inside the caller's transaction (the one that
 * creates the call), so a refusal or a rollback reserves nothing. Checks plan
 * minutes (403 `plan_minutes_exhausted`) before the key's cap (429 `minute_cap_reached`, Retry-After
 * until the next month). Locks are always taken plan row first, then key row, so no two
 * reservations can deadlock.
 */
export async function reserveMinutes(tx: Db, clock: Clock, input: ReserveInput): Promise<Reservation> {
  const longest = input.maxSeconds ?? MAX_CALL_SECONDS;
  if (!input.livemode) return { maxSeconds: longest, reservedMinutes: 0 };
  const now = clock.now();
  const month = monthOf(now);
  let maxSeconds = longest;

  // Every read goes out in one round trip; the statements of a connection run in the order sent, so
  // the plan's row is still locked before the key's.
  const keyId = input.publishableKeyId;
  const [planMinutes, planUsed, key] = await settledAll([
    input.planMinutes !== undefined
      ? Promise.resolve(input.planMinutes)
      : findOrganization(tx, input.organizationId).then((org) => org?.plan_minutes ?? 0),
    input.planUsedLocked !== undefined
      ? Promise.resolve(input.planUsedLocked)
      : lockUsage(tx, "plan", input.organizationId, month),
    keyId
      ? settledAll([monthlyMinuteCap(tx, keyId), lockUsage(tx, "key", keyId, month)] as const)
      : Promise.resolve(null),
  ] as const);
  const planRemaining = planMinutes - planUsed;
  if (planRemaining <= 0) throw planMinutesExhausted();
  maxSeconds = planMaxSeconds(maxSeconds, planRemaining);

  if (key) {
    const [cap, keyUsed] = key;
    const keyRemaining = cap - keyUsed;
    if (keyRemaining <= 0) {
      throw new ApiError("minute_cap_reached", "The monthly minute cap of this key is used up.", {
        headers: { "Retry-After": String(secondsUntilNextMonth(now)) },
      });
    }
    maxSeconds = Math.min(maxSeconds, keyRemaining * 60);
  }

  const reservedMinutes = Math.ceil(maxSeconds / 60);
  await settledAll([
    addUsage(tx, month, input.organizationId, input.publishableKeyId ?? null, reservedMinutes),
    insertReservation(tx, {
      call_id: input.callId,
      organization_id: input.organizationId,
      publishable_key_id: input.publishableKeyId ?? null,
      plan_charged: true,
      month,
      reserved_minutes: reservedMinutes,
      max_seconds: maxSeconds,
      created_at: now,
    }),
  ]);
  return { maxSeconds, reservedMinutes };
}

export interface Settlement {
  keptMinutes: number;
  returnedMinutes: number;
}

/**
 * Ends a reservation: `ceil(actualSeconds / 60)` minutes, at least 1 and at most what was reserved,
 * stay counted (in the month the call started); the rest goes back. `actualSeconds` null means the
 * call never started (it failed while starting), and everything goes back. Idempotent: only the first
 * settlement of a call changes anything; later ones, or a call without a reservation, return null.
 */
export async function settleMinutes(
  sql: Sql,
  clock: Clock,
  callId: string,
  actualSeconds: number | null,
): Promise<Settlement | null> {
  return (await pipelinedTransaction(sql, (tx) =>
    settleReservation(tx, clock, callId, actualSeconds),
  )) as Settlement | null;
}

/**
 * settleMinutes inside the caller's transaction, for code that already holds one (a timer handler, a
 * webhook that also moves the call): the settlement commits or rolls back with the call's change.
 */
export async function settleReservation(
  tx: Db,
  clock: Clock,
  callId: string,
  actualSeconds: number | null,
): Promise<Settlement | null> {
  const used =
    actualSeconds === null
      ? 0
      : Number.isFinite(actualSeconds)
        ? Math.max(1, Math.ceil(Math.max(0, actualSeconds) / 60))
        : 2_147_483_647;
  const r = await settleOpenReservation(tx, callId, used, clock.now());
  if (!r) return null;
  const returned = r.reserved_minutes - r.kept_minutes;
  // The key's row only: the plan's minutes wait on the reservation (db/minutes.ts), so a settlement
  // locks no plan row and has no order to keep with reserveMinutes (plan row, then key row).
  if (returned > 0 && r.publishable_key_id) {
    await subtractUsage(tx, "key", r.publishable_key_id, r.month, returned);
    // The key's abuse view counted the reservation on the day the call started.
    await returnKeyDayMinutes(tx, r.publishable_key_id, dayOf(r.created_at), returned);
  }
  return { keptMinutes: r.kept_minutes, returnedMinutes: returned };
}

/** Minutes counted this month (reservations of running calls included), for checks and operators. */
export async function usedMinutes(
  sql: Db,
  clock: Clock,
  subject: { organizationId: string } | { publishableKeyId: string },
): Promise<number> {
  const [kind, id] =
    "organizationId" in subject
      ? (["plan", subject.organizationId] as const)
      : (["key", subject.publishableKeyId] as const);
  return usageOf(sql, kind, id, monthOf(clock.now()));
}
