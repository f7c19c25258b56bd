import type { CallWindow } from "../db/organizations.ts";

/**
 * An organization's call window: the hours, in its own time zone, at which live phone calls may
 * start. `days` are ISO weekdays (Monday = 1) of the local date. A window whose `end` comes before
 * its `start` crosses midnight and belongs to the day it starts on: `{start: "20:00", end: "02:00",
 * days: [5]}` is open from Friday 20:00 to Saturday 02:00. `end` may be "24:00" (until midnight).
 *
 * Everything is computed with Intl in the window's time zone, so daylight-saving changes are the
 * zone's own: an opening at a local time that does not exist that day (the clocks jump over it) is
 * the first instant after the jump; one that happens twice is its first occurrence.
 */

export type { CallWindow };

export const ALL_DAYS = [1, 2, 3, 4, 5, 6, 7] as const;

const DAY = 86_400_000;
const HHMM = /^([01][0-9]|2[0-3]):([0-5][0-9])$/;

/** Seconds since midnight of "HH:MM" ("24:00" is 86,400), or null when it is not a time of day. */
export function secondsOfDay(text: string, opts: { endOfDay?: boolean } = {}): number | null {
  if (opts.endOfDay && text === "24:00") return 86_400;
  const m = HHMM.exec(text);
  return m ? Number(m[1]) * 3600 + Number(m[2]) * 60 : null;
}

/**
 * The canonical name of an IANA time zone (as Intl knows it), or null when Intl does not know it.
 * Offsets such as "+01:00" are not time zones of a place and are refused.
 */
export function canonicalTimeZone(name: string): string | null {
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(name)) return null;
  try {
    return new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** Reads wall-clock time in one zone; made once per computation (a formatter costs more than a format). */
class Zone {
  readonly #format: Intl.DateTimeFormat;
  constructor(timeZone: string) {
    this.#format = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
  }

  /** The wall-clock time at `ms` as if it were UTC (epoch ms): comparable with Date.UTC(local fields). */
  wall(ms: number): number {
    const f: Record<string, number> = {};
    for (const p of this.#format.formatToParts(ms)) if (p.type !== "literal") f[p.type] = Number(p.value);
    return Date.UTC(f.year!, f.month! - 1, f.day!, f.hour!, f.minute!, f.second!);
  }

  /**
   * The first instant whose wall-clock time is `wall` (epoch ms of the local fields read as UTC), or
   * when that wall time does not exist (the clocks jump over it), the first instant after the jump.
   */
  instant(wall: number): number {
    // The zone's offsets a day either side: any change of offset near `wall` lies between them.
    const before = this.wall(wall - DAY) - (wall - DAY);
    const after = this.wall(wall + DAY) - (wall + DAY);
    const candidates = [...new Set([wall - before, wall - after])].sort((a, b) => a - b);
    const exact = candidates.find((c) => this.wall(c) === wall);
    if (exact !== undefined) return exact;
    // A gap: the first instant whose wall time is at or past `wall` is the jump itself.
    let lo = candidates[0]!;
    let hi = candidates[candidates.length - 1]!;
    while (hi - lo > 1000) {
      const mid = lo + Math.max(1000, Math.floor((hi - lo) / 2000) * 1000);
      if (this.wall(mid) >= wall) hi = mid;
      else lo = mid;
    }
    return hi;
  }
}

/** ISO weekday (Monday = 1 … Sunday = 7) of a local date given as UTC midnight epoch ms. */
function isoWeekday(dateMs: number): number {
  const d = new Date(dateMs).getUTCDay();
  return d === 0 ? 7 : d;
}

/** Whether a live call may start at `at`. */
export function isOpen(window: CallWindow, at: Date): boolean {
  return openAt(window, new Zone(window.timeZone), at.getTime());
}

function openAt(window: CallWindow, zone: Zone, ms: number): boolean {
  const start = secondsOfDay(window.start)!;
  const end = secondsOfDay(window.end, { endOfDay: true })!;
  const wall = zone.wall(ms);
  const date = Math.floor(wall / DAY) * DAY;
  const t = (wall - date) / 1000;
  const today = window.days.includes(isoWeekday(date));
  if (start < end) return today && t >= start && t < end;
  // Crosses midnight: the evening of a listed day, or the small hours after one.
  const yesterday = window.days.includes(isoWeekday(date - DAY));
  return (today && t >= start) || (yesterday && t < end);
}

/**
 * The first instant at or after `at` when the window is open: `at` itself when it is open now.
 * Null only for a window that never opens in the next two weeks (its every opening falls in a gap
 * of the clocks, which no real window does).
 */
export function nextOpening(window: CallWindow, at: Date): Date | null {
  const zone = new Zone(window.timeZone);
  const ms = at.getTime();
  if (openAt(window, zone, ms)) return at;
  const start = secondsOfDay(window.start)!;
  const today = Math.floor(zone.wall(ms) / DAY) * DAY;
  for (let k = 0; k <= 14; k++) {
    const date = today + k * DAY;
    if (!window.days.includes(isoWeekday(date))) continue;
    const opening = zone.instant(date + start * 1000);
    // An opening pushed past the window's end by a jump of the clocks is no opening.
    if (opening > ms && openAt(window, zone, opening)) return new Date(opening);
  }
  return null;
}

const DAY_NAMES = ["", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/** The window in words, for refusals: "09:00–20:00 Europe/Paris, Monday, Tuesday". */
export function describeWindow(window: CallWindow): string {
  const days = window.days.length === 7 ? "every day" : window.days.map((d) => DAY_NAMES[d]).join(", ");
  return `${window.start}–${window.end} ${window.timeZone}, ${days}`;
}
