import type { Clock } from "./clock.ts";

/**
 * Identifier prefixes of the API's objects, plus `req` for request ids. `whd` (webhook deliveries) and
 * `tmr` (timers) name rows the database numbers itself: see `serialId`.
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
  let out = "";
  let t = time;
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[t % 32] + out;
    t = Math.floor(t / 32);
  }
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
 * The id of a row the database numbers (webhook deliveries, timers): the prefix and the row's number in
 * 26 Crockford base-32 characters, zero-padded, so that every id has one shape and serves as a cursor
 * like the others. Not a ULID: the number carries no time, only the order of insertion.
 */
export function serialId(prefix: IdPrefix, n: string | number | bigint): string {
  let v = BigInt(n);
  let out = "";
  for (let i = 0; i < 26; i++) {
    out = CROCKFORD[Number(v % 32n)] + out;
    v /= 32n;
  }
  return `${prefix}_${out}`;
}

/** The row number behind a serial id (as decimal text), or null when `id` is not one of `prefix`. */
export function serialOf(id: string, prefix: IdPrefix): string | null {
  if (!isId(id, prefix)) return null;
  let v = 0n;
  for (const ch of id.slice(prefix.length + 1)) v = v * 32n + BigInt(CROCKFORD.indexOf(ch));
  // Row numbers are bigint: anything above is no row.
  return v <= 9_223_372_036_854_775_807n ? v.toString() : null;
}
