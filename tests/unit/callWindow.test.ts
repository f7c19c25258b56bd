import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { type CallWindow, canonicalTimeZone, isOpen, nextOpening } from "../../src/services/callWindow.ts";

/** The call window in its own time zone: days, midnight, daylight-saving changes. */

const at = (iso: string) => new Date(iso);
const next = (w: CallWindow, iso: string) => nextOpening(w, at(iso))?.toISOString() ?? null;

const PARIS_WEEKDAYS: CallWindow = {
  start: "09:00",
  end: "20:00",
  timeZone: "Europe/Paris",
  days: [1, 2, 3, 4, 5],
};

describe("a window within one day", () => {
  test("open from start (included) to end (excluded), local time, winter and summer offsets", () => {
    // Monday 2026-11-23: Paris is UTC+1.
    expect(isOpen(PARIS_WEEKDAYS, at("2026-11-23T07:59:59Z"))).toBe(false);
    expect(isOpen(PARIS_WEEKDAYS, at("2026-11-23T08:00:00Z"))).toBe(true);
    expect(isOpen(PARIS_WEEKDAYS, at("2026-11-23T18:59:59Z"))).toBe(true);
    expect(isOpen(PARIS_WEEKDAYS, at("2026-11-23T19:00:00Z"))).toBe(false);
    // Monday 2026-06-22: UTC+2.
    expect(isOpen(PARIS_WEEKDAYS, at("2026-06-22T07:00:00Z"))).toBe(true);
    expect(isOpen(PARIS_WEEKDAYS, at("2026-06-22T06:59:00Z"))).toBe(false);
    expect(isOpen(PARIS_WEEKDAYS, at("2026-06-22T18:00:00Z"))).toBe(false);
  });

  test("the day is the local date's: 23:30 UTC on Sunday is Monday in Tokyo", () => {
    const tokyo: CallWindow = { start: "08:00", end: "09:00", timeZone: "Asia/Tokyo", days: [1] };
    // Sunday 2026-11-22 23:30 UTC = Monday 08:30 JST.
    expect(isOpen(tokyo, at("2026-11-22T23:30:00Z"))).toBe(true);
    expect(isOpen(tokyo, at("2026-11-23T23:30:00Z"))).toBe(false);
  });

  test("excluded days: Friday evening's next opening is Monday morning", () => {
    expect(next(PARIS_WEEKDAYS, "2026-11-27T19:30:00Z")).toBe("2026-11-30T08:00:00.000Z");
    // Saturday and Sunday are closed all day.
    expect(isOpen(PARIS_WEEKDAYS, at("2026-11-28T10:00:00Z"))).toBe(false);
    expect(isOpen(PARIS_WEEKDAYS, at("2026-11-29T10:00:00Z"))).toBe(false);
    // Before the opening on a listed day: that day's opening.
    expect(next(PARIS_WEEKDAYS, "2026-11-24T05:00:00Z")).toBe("2026-11-24T08:00:00.000Z");
  });

  test("a window on one weekday only, asked the day after: the next week's", () => {
    const mondays: CallWindow = { start: "10:00", end: "11:00", timeZone: "UTC", days: [1] };
    expect(next(mondays, "2026-11-24T10:30:00Z")).toBe("2026-11-30T10:00:00.000Z");
    expect(next(mondays, "2026-11-23T11:00:00Z")).toBe("2026-11-30T10:00:00.000Z");
  });

  test("open now: the next opening is now", () => {
    expect(next(PARIS_WEEKDAYS, "2026-11-23T12:34:56.789Z")).toBe("2026-11-23T12:34:56.789Z");
  });

  test('"24:00" closes at midnight; 00:00–24:00 is the whole day', () => {
    const evening: CallWindow = { start: "18:00", end: "24:00", timeZone: "UTC", days: [1] };
    expect(isOpen(evening, at("2026-11-23T23:59:59Z"))).toBe(true);
    expect(isOpen(evening, at("2026-11-24T00:00:00Z"))).toBe(false);
    const allDay: CallWindow = { start: "00:00", end: "24:00", timeZone: "UTC", days: [1] };
    expect(isOpen(allDay, at("2026-11-23T00:00:00Z"))).toBe(true);
    expect(isOpen(allDay, at("2026-11-23T23:59:59Z"))).toBe(true);
    expect(isOpen(allDay, at("2026-11-24T00:00:00Z"))).toBe(false);
  });
});

describe("a window that crosses midnight belongs to the day it starts on", () => {
  // Fridays 22:00 to Saturdays 06:00, New York.
  const fridayNights: CallWindow = { start: "22:00", end: "06:00", timeZone: "America/New_York", days: [5] };

  test("open Friday night and Saturday early morning, closed after, and Saturday night too", () => {
    // Friday 2026-11-27, New York is UTC-5.
    expect(isOpen(fridayNights, at("2026-11-28T02:59:59Z"))).toBe(false); // Fri 21:59:59
    expect(isOpen(fridayNights, at("2026-11-28T03:00:00Z"))).toBe(true); // Fri 22:00
    expect(isOpen(fridayNights, at("2026-11-28T10:59:59Z"))).toBe(true); // Sat 05:59:59
    expect(isOpen(fridayNights, at("2026-11-28T11:00:00Z"))).toBe(false); // Sat 06:00
    expect(isOpen(fridayNights, at("2026-11-29T04:00:00Z"))).toBe(false); // Sat 23:00: Saturday is not listed
    expect(isOpen(fridayNights, at("2026-11-29T08:00:00Z"))).toBe(false); // Sun 03:00: Saturday is not listed
    // Thursday night's small hours belong to Thursday, which is not listed: Friday 03:00 is closed.
    expect(isOpen(fridayNights, at("2026-11-27T08:00:00Z"))).toBe(false);
  });

  test("next opening from Saturday morning: the next Friday 22:00", () => {
    expect(next(fridayNights, "2026-11-28T12:00:00Z")).toBe("2026-12-05T03:00:00.000Z");
  });

  test("a night over the spring change keeps local times on both sides", () => {
    // Saturdays 22:00 → Sundays 06:00; on 2026-03-08 New York goes from UTC-5 to UTC-4 at 02:00.
    const saturdays: CallWindow = { start: "22:00", end: "06:00", timeZone: "America/New_York", days: [6] };
    expect(next(saturdays, "2026-03-07T12:00:00Z")).toBe("2026-03-08T03:00:00.000Z"); // Sat 22:00 EST
    expect(isOpen(saturdays, at("2026-03-08T06:59:59Z"))).toBe(true); // Sun 01:59:59 EST
    expect(isOpen(saturdays, at("2026-03-08T07:00:00Z"))).toBe(true); // Sun 03:00 EDT
    expect(isOpen(saturdays, at("2026-03-08T09:59:59Z"))).toBe(true); // Sun 05:59:59 EDT
    expect(isOpen(saturdays, at("2026-03-08T10:00:00Z"))).toBe(false); // Sun 06:00 EDT
  });
});

describe("daylight-saving changes", () => {
  test("an opening the clocks jump over is the instant after the jump (Paris, 2026-03-29)", () => {
    // 02:00 CET becomes 03:00 CEST at 01:00 UTC: 02:30 does not exist that Sunday.
    const w: CallWindow = { start: "02:30", end: "04:00", timeZone: "Europe/Paris", days: [7] };
    expect(next(w, "2026-03-28T23:00:00Z")).toBe("2026-03-29T01:00:00.000Z");
    expect(isOpen(w, at("2026-03-29T00:59:59Z"))).toBe(false); // 01:59:59 CET
    expect(isOpen(w, at("2026-03-29T01:00:00Z"))).toBe(true); // 03:00 CEST
    expect(isOpen(w, at("2026-03-29T02:00:00Z"))).toBe(false); // 04:00 CEST
  });

  test("a window wholly inside the jump does not open that day: the next listed day's", () => {
    const w: CallWindow = { start: "02:00", end: "02:30", timeZone: "Europe/Paris", days: [7] };
    expect(next(w, "2026-03-28T23:00:00Z")).toBe("2026-04-05T00:00:00.000Z"); // 02:00 CEST a week later
  });

  test("a half-hour jump (Lord Howe Island, 2026-10-04: 02:00 becomes 02:30)", () => {
    const w: CallWindow = { start: "02:00", end: "03:00", timeZone: "Australia/Lord_Howe", days: [7] };
    // 02:00 LHST (UTC+10:30) is 15:30 UTC on Saturday: the first instant after the jump.
    expect(next(w, "2026-10-03T15:00:00Z")).toBe("2026-10-03T15:30:00.000Z");
  });

  test("a local time that happens twice opens at its first occurrence (Paris, 2026-10-25)", () => {
    // 03:00 CEST becomes 02:00 CET at 01:00 UTC: 02:00–03:00 happens twice.
    const w: CallWindow = { start: "02:30", end: "03:30", timeZone: "Europe/Paris", days: [7] };
    expect(next(w, "2026-10-24T22:00:00Z")).toBe("2026-10-25T00:30:00.000Z"); // 02:30 CEST
    expect(isOpen(w, at("2026-10-25T00:45:00Z"))).toBe(true); // 02:45 CEST
    expect(isOpen(w, at("2026-10-25T01:15:00Z"))).toBe(false); // 02:15 CET: before 02:30 on the wall
    expect(isOpen(w, at("2026-10-25T01:45:00Z"))).toBe(true); // 02:45 CET
    expect(isOpen(w, at("2026-10-25T02:30:00Z"))).toBe(false); // 03:30 CET
  });

  test("an hour of the day that the jump removes is closed, the rest of the window holds", () => {
    const nights: CallWindow = { start: "01:00", end: "05:00", timeZone: "Europe/Paris", days: [7] };
    expect(isOpen(nights, at("2026-03-29T00:30:00Z"))).toBe(true); // 01:30 CET
    expect(isOpen(nights, at("2026-03-29T01:30:00Z"))).toBe(true); // 03:30 CEST
    expect(isOpen(nights, at("2026-03-29T03:00:00Z"))).toBe(false); // 05:00 CEST
  });
});

describe("time zones", () => {
  test("Intl decides what is a zone, with its canonical name; offsets and unknown names are refused", () => {
    expect(canonicalTimeZone("Europe/Paris")).toBe("Europe/Paris");
    expect(canonicalTimeZone("europe/paris")).toBe("Europe/Paris");
    expect(canonicalTimeZone("UTC")).toBe("UTC");
    expect(canonicalTimeZone("Europe/Atlantis")).toBeNull();
    expect(canonicalTimeZone("+01:00")).toBeNull();
    expect(canonicalTimeZone("")).toBeNull();
  });
});

describe("any window, any instant", () => {
  const zones = [
    "Europe/Paris",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "UTC",
    "America/Santiago",
  ];
  const quarter = fc.integer({ min: 0, max: 95 }).map((q) => {
    const m = q * 15;
    return `${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
  });
  const windows = fc
    .record({
      start: quarter,
      end: quarter,
      timeZone: fc.constantFrom(...zones),
      days: fc.uniqueArray(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 7 }),
    })
    .filter((w) => w.start !== w.end);
  // Instants on quarter hours across 2026, daylight-saving changes included.
  const instants = fc
    .integer({ min: 0, max: 365 * 96 })
    .map((q) => new Date(Date.UTC(2026, 0, 1) + q * 15 * 60_000));

  test("the next opening is open, not before the instant, and nothing before it is open", () => {
    fc.assert(
      fc.property(windows, instants, (w, from) => {
        const opening = nextOpening(w, from);
        expect(opening).not.toBeNull();
        expect(opening!.getTime()).toBeGreaterThanOrEqual(from.getTime());
        expect(isOpen(w, opening!)).toBe(true);
        // Openings fall on quarter hours here (Lord Howe's half-hour shift too): check each one before it.
        for (let t = from.getTime(); t < opening!.getTime(); t += 15 * 60_000) {
          if (isOpen(w, new Date(t))) return false;
        }
        return true;
      }),
      { numRuns: 60 },
    );
  });
});
