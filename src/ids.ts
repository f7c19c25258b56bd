import { createHmac } from "node:crypto";
import type { Clock } from "./clock.ts";

/**
 * Identifier prefixes of the API's objects, plus `req` for request ids. `whd` (webhook deliveries) and
 * `tmr` (timers) name rows the database numbers itself: see `rowId`.
 */
export const ID_PREFIXES = [
  "org",
  "agt",
  "key",
  "call",
  "cmp",
  "ct",
  "task",
  "kb",
  "doc",
  "evt",
  "we",
  "bn",
  "whd",
  "tmr",
  "req",
] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const ULID_RE = /^[0-9A-HJKMNP-TV-Z]{26}$/;

interface MonotonicState {
  lastTime: number;
  lastRandom: Uint8Array;
}

/**
 * The one id generator: `<prefix>_<ULID>`. Monotonic inside one millisecond (the random part is
 * incremented), so ids made by one generator sort in creation order. The process makes one per clock
 * (the composition root); a test clock set in the past never borrows the system clock's sequence.
 */
export class IdGenerator {
  readonly #clock: Clock;
  readonly #state: MonotonicState = { lastTime: -1, lastRandom: new Uint8Array(10) };

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  next(prefix: IdPrefix): string {
    return `${prefix}_${ulid(this.#clock.now().getTime(), this.#state)}`;
  }
}

function ulid(time: number, state: MonotonicState): string {
  const { lastRandom } = state;
  if (time <= state.lastTime) {
    time = state.lastTime;
    incrementRandom(lastRandom);
  } else {
    state.lastTime = time;
    crypto.getRandomValues(lastRandom);
  }
  let out = timeChars(time);
  // 80 random bits as 16 base32 characters.
  let bits = 0;
  let acc = 0;
  for (const byte of lastRandom) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += CROCKFORD[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  return out;
}

/** A time in milliseconds as a ULID's first ten characters. */
function timeChars(time: number): string {
  let out = "";
  let t = time;
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return out;
}

function incrementRandom(lastRandom: Uint8Array) {
  for (let i = lastRandom.length - 1; i >= 0; i--) {
    if (lastRandom[i] === 255) {
      lastRandom[i] = 0;
    } else {
      lastRandom[i] = (lastRandom[i] ?? 0) + 1;
      return;
    }
  }
}

/** True when `value` is a well-formed id with this prefix. */
export function isId(value: string, prefix: IdPrefix): boolean {
  const sep = prefix.length;
  return value.length === sep + 27 && value.startsWith(`${prefix}_`) && ULID_RE.test(value.slice(sep + 1));
}

/** True when `value` is a well-formed id of any known prefix. */
export function isAnyId(value: string): boolean {
  const i = value.indexOf("_");
  return (
    i > 0 &&
    (ID_PREFIXES as readonly string[]).includes(value.slice(0, i)) &&
    isId(value, value.slice(0, i) as IdPrefix)
  );
}

/** The creation time encoded in an id, in milliseconds. */
export function idTime(id: string): number {
  const u = id.slice(id.indexOf("_") + 1, id.indexOf("_") + 11);
  let t = 0;
  for (const ch of u) t = t * 32 + CROCKFORD.indexOf(ch);
  return t;
}

/**
 * The id of a row the database numbers (webhook deliveries, timers), a ULID like every other id: its
 * first ten characters the row's creation time, its last sixteen the row's number enciphered under a
 * key of the database (`rowIdKey`: a four-round Feistel network over 80 bits whose rounds are
 * HMAC-SHA256 of the prefix, the time and the half). So these ids sort by time, serve as cursors like
 * the others, and tell no one how many rows the instance has made or which one comes next.
 */
export function rowId(
  key: Uint8Array,
  prefix: IdPrefix,
  n: string | number | bigint,
  createdAt: Date,
): string {
  const time = createdAt.getTime();
  let left = BigInt(n) >> 40n;
  let right = BigInt(n) & HALF;
  for (let round = 0; round < ROUNDS; round++) {
    [left, right] = [right, left ^ rowIdRound(key, prefix, time, round, right)];
  }
  let v = (left << 40n) | right;
  let tail = "";
  for (let i = 0; i < 16; i++) {
    tail = CROCKFORD[Number(v & 31n)] + tail;
    v >>= 5n;
  }
  return `${prefix}_${timeChars(time)}${tail}`;
}

/** The row number behind a row id (as decimal text), or null when `id` cannot be one of `prefix`. */
export function rowOf(key: Uint8Array, id: string, prefix: IdPrefix): string | null {
  if (!isId(id, prefix)) return null;
  const time = idTime(id);
  let v = 0n;
  for (const ch of id.slice(prefix.length + 11)) v = (v << 5n) | BigInt(CROCKFORD.indexOf(ch));
  let left = v >> 40n;
  let right = v & HALF;
  for (let round = ROUNDS - 1; round >= 0; round--) {
    [left, right] = [right ^ rowIdRound(key, prefix, time, round, left), left];
  }
  const n = (left << 40n) | right;
  // Row numbers are positive bigints: anything else (a forged or altered id) is no row.
  return n >= 1n && n <= 9_223_372_036_854_775_807n ? n.toString() : null;
}

/** The name of the database's secret that keys row ids (db/serverSecrets.ts). */
export const ROW_ID_KEY = "row-ids";

const ROUNDS = 4;
const HALF = (1n << 40n) - 1n;

function rowIdRound(key: Uint8Array, prefix: string, time: number, round: number, half: bigint): bigint {
  const mac = createHmac("sha256", key).update(`${prefix}.${round}.${time}.${half}`).digest();
  let out = 0n;
  for (let i = 0; i < 5; i++) out = (out << 8n) | BigInt(mac[i]!);
  return out;
}
