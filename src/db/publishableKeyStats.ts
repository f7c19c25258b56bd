import type { Fragment, PendingQuery } from "postgres";
import type { Db } from "./engine/connection.ts";

/**
 * Statements of the abuse view of publishable keys (publishable_key_daily_stats, sql/0019): one row per
 * key and UTC day, counted when an attempt is refused or started. One upsert per attempt: its row lock
 * serialises parallel attempts of every process, so the counts are exact without a transaction of its
 * own, and reading 90 days is reading 90 rows, never a scan of logs.
 */

/** Distinct refused origins kept per key and day; the others are counted together under OTHER_ORIGINS. */
export const MAX_ORIGINS_PER_DAY = 100;
export const OTHER_ORIGINS = "(other origins)";
/** Buckets of the bot check's score: 0.0, 0.1 … 1.0. */
export const SCORE_BUCKETS = 11;

export interface KeyAttempt {
  at: Date;
  /** Started a call (with its reserved minutes), or refused with this error code. */
  outcome: { started: true; minutes: number } | { refused: string; origin: string | null };
  /** The bot check's score, when the verifier gave one. */
  captchaScore: number | null;
}

/** The bucket of a score (the nearest tenth). */
export function scoreBucket(score: number): number {
  return Math.min(SCORE_BUCKETS - 1, Math.max(0, Math.round(score * 10)));
}

/**
 * Counts one attempt of the key `key` (its id, or the hash of the key as presented: then a key that
 * exists counts, revoked or not, in the same statement; a leaked key still used after its revocation
 * is what the view is for). Usable as a statement of its own or inside a transaction.
 */
export function countKeyAttempt(
  sql: Db,
  key: { id: string } | { hash: Uint8Array },
  a: KeyAttempt,
): PendingQuery<[]> {
  const source: Fragment =
    "id" in key
      ? sql`select ${key.id}::text as id`
      : sql`select id from publishable_keys where key_hash = ${key.hash}`;
  const started = "started" in a.outcome;
  const minutes = "started" in a.outcome ? a.outcome.minutes : 0;
  const code = "refused" in a.outcome ? a.outcome.refused : null;
  const origin = "refused" in a.outcome ? a.outcome.origin : null;
  const bucket = a.captchaScore === null ? null : scoreBucket(a.captchaScore);
  const scores = `{${Array.from({ length: SCORE_BUCKETS }, (_, i) => (i === bucket ? 1 : 0)).join(",")}}`;
  return sql`
    insert into publishable_key_daily_stats as s
      (publishable_key_id, day, attempts, started, refused, minutes, captcha_scores, refused_origins, last_attempt_at)
    select k.id, ${a.at.toISOString().slice(0, 10)}::date, 1, ${started ? 1 : 0}::integer,
      ${code === null ? sql`'{}'::jsonb` : sql`jsonb_build_object(${code}::text, 1)`},
      ${minutes}::integer, ${scores}::integer[],
      ${origin === null ? sql`'{}'::jsonb` : sql`jsonb_build_object(${origin}::text, 1)`},
      ${a.at}::timestamptz
    from (${source}) k
    on conflict (publishable_key_id, day) do update set
      attempts = s.attempts + 1,
      started = s.started + excluded.started,
      minutes = s.minutes + excluded.minutes,
      refused = ${code === null ? sql`s.refused` : oneMoreRefusal(sql, sql`s.refused`, code)},
      captcha_scores = ${
        bucket === null
          ? sql`s.captcha_scores`
          : sql`array(select v + (i = ${bucket + 1})::integer from unnest(s.captcha_scores) with ordinality u(v, i) order by i)`
      },
      refused_origins = ${origin === null ? sql`s.refused_origins` : originCount(sql, origin)},
      last_attempt_at = greatest(s.last_attempt_at, excluded.last_attempt_at)` as unknown as PendingQuery<[]>;
}

/** The refusal counts `counts` (a jsonb expression, code → count) with one more under `code`. */
function oneMoreRefusal(sql: Db, counts: Fragment, code: string): Fragment {
  return sql`jsonb_set(${counts}, array[${code}::text], to_jsonb(coalesce((${counts} ->> ${code}::text)::integer, 0) + 1))`;
}

/** The day's origin map with one more refusal from `origin`, or from the others once the map is full. */
function originCount(sql: Db, origin: string): Fragment {
  return sql`(
    select jsonb_set(s.refused_origins, array[o.name], to_jsonb(coalesce((s.refused_origins ->> o.name)::integer, 0) + 1))
    from (select case
      when s.refused_origins ? ${origin}::text
        or (select count(*) from jsonb_object_keys(s.refused_origins)) < ${MAX_ORIGINS_PER_DAY}::integer
      then ${origin}::text else ${OTHER_ORIGINS}::text end as name) o)`;
}

/**
 * Minutes that a call started on `day` gave back at its end (it ran shorter than reserved, or never
 * started): the day's minutes then count what the call kept.
 */
export async function returnKeyDayMinutes(
  tx: Db,
  keyId: string,
  day: string,
  minutes: number,
): Promise<void> {
  await tx`
    update publishable_key_daily_stats set minutes = greatest(0, minutes - ${minutes}::integer)
    where publishable_key_id = ${keyId} and day = ${day}::date`;
}

/**
 * A start counted on `day` whose call then failed at the media server (502 `call_start_failed`): the
 * attempt stays counted, as a refusal under that code and from its origin, rather than a start.
 */
export async function countStartFailure(sql: Db, keyId: string, day: string, origin: string): Promise<void> {
  await sql`
    update publishable_key_daily_stats s set started = greatest(0, started - 1),
      refused = ${oneMoreRefusal(sql, sql`s.refused`, "call_start_failed")},
      refused_origins = ${originCount(sql, origin)}
    where publishable_key_id = ${keyId} and day = ${day}::date`;
}

export interface KeyDayRow {
  day: string;
  attempts: number;
  started: number;
  refused: Record<string, number>;
  minutes: number;
  captcha_scores: number[];
  refused_origins: Record<string, number>;
}

/** The key's rows from `firstDay` (`YYYY-MM-DD`, UTC) on, oldest first. */
export function readKeyDays(sql: Db, keyId: string, firstDay: string): Promise<KeyDayRow[]> {
  return sql<KeyDayRow[]>`
    select to_char(day, 'YYYY-MM-DD') as day, attempts, started, refused, minutes, captcha_scores, refused_origins
    from publishable_key_daily_stats
    where publishable_key_id = ${keyId} and day >= ${firstDay}::date
    order by day`;
}
