import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { idTime, isAnyId, isId, newId } from "../../src/ids.ts";

describe("newId", () => {
  test("is <prefix>_<26 Crockford base32 characters>", () => {
    const id = newId("call");
    expect(id).toMatch(/^call_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(isId(id, "call")).toBe(true);
    expect(isId(id, "ct")).toBe(false);
    expect(isAnyId(id)).toBe(true);
  });

  test("encodes the clock's time, so ids sort by creation time", () => {
    const clock = new ManualClock("2026-11-21T09:30:00.000Z");
    const a = newId("ct", clock);
    clock.advance(1);
    const b = newId("ct", clock);
    expect(idTime(a)).toBe(Date.parse("2026-11-21T09:30:00.000Z"));
    expect(a < b).toBe(true);
  });

  test("is strictly increasing within one millisecond (monotonic random part)", () => {
    const clock = new ManualClock();
    const ids = Array.from({ length: 10_000 }, () => newId("evt", clock));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  test("a clock moving backwards never produces an id that sorts before an earlier one of that clock", () => {
    const clock = new ManualClock("2026-11-21T09:30:00.000Z");
    const first = newId("call", clock);
    clock.advance(-5_000);
    expect(newId("call", clock) > first).toBe(true);
  });
});

describe("isId / isAnyId refuse what is not an id", () => {
  const good = newId("ct");
  test.each([
    ["", "empty"],
    ["ct_", "prefix only"],
    [`${good}X`, "too long"],
    [good.slice(0, -1), "too short"],
    [good.replace("ct_", "CT_"), "prefix case"],
    [`ct_${"I".repeat(26)}`, "letters outside Crockford base32"],
    ["ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0'", "SQL metacharacter"],
    [`zz_${good.slice(3)}`, "unknown prefix"],
  ])("%p (%s)", (value) => {
    expect(isId(value, "ct")).toBe(false);
    expect(isAnyId(value)).toBe(false);
  });
});
