import { describe, expect, test } from "bun:test";
import { ManualClock, systemClock } from "../../src/clock.ts";
import { IdGenerator, idTime, isAnyId, isId, rowId, rowOf } from "../../src/ids.ts";

describe("IdGenerator", () => {
  test("is <prefix>_<26 Crockford base32 characters>", () => {
    const id = new IdGenerator(systemClock).next("call");
    expect(id).toMatch(/^call_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(isId(id, "call")).toBe(true);
    expect(isId(id, "ct")).toBe(false);
    expect(isAnyId(id)).toBe(true);
  });

  test("encodes the clock's time, so ids sort by creation time", () => {
    const clock = new ManualClock("2026-11-21T09:30:00.000Z");
    const ids = new IdGenerator(clock);
    const a = ids.next("ct");
    clock.advance(1);
    const b = ids.next("ct");
    expect(idTime(a)).toBe(Date.parse("2026-11-21T09:30:00.000Z"));
    expect(a < b).toBe(true);
  });

  test("is strictly increasing within one millisecond (monotonic random part)", () => {
    const generator = new IdGenerator(new ManualClock());
    const ids = Array.from({ length: 10_000 }, () => generator.next("evt"));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  test("two generators on two clocks keep separate sequences", () => {
    const past = new IdGenerator(new ManualClock("2020-01-01T00:00:00.000Z"));
    const now = new IdGenerator(systemClock);
    const a = now.next("call");
    const b = past.next("call");
    expect(idTime(b)).toBe(Date.parse("2020-01-01T00:00:00.000Z"));
    expect(b < a).toBe(true);
  });

  test("a clock moving backwards never produces an id that sorts before an earlier one of that clock", () => {
    const clock = new ManualClock("2026-11-21T09:30:00.000Z");
    const ids = new IdGenerator(clock);
    const first = ids.next("call");
    clock.advance(-5_000);
    expect(ids.next("call") > first).toBe(true);
  });
});

describe("isId / isAnyId refuse what is not an id", () => {
  const good = new IdGenerator(systemClock).next("ct");
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

describe("rowId: the ids of rows the database numbers (webhook deliveries, timers)", () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const at = new Date("2026-11-21T09:30:00.123Z");

  test("a ULID of the row's creation time whose number comes back under the same key only", () => {
    for (const n of ["1", "2", "42", "1099511627776", "9223372036854775807"]) {
      const id = rowId(key, "whd", n, at);
      expect(isId(id, "whd")).toBe(true);
      expect(idTime(id)).toBe(at.getTime());
      expect(rowOf(key, id, "whd")).toBe(n);
      expect(rowOf(crypto.getRandomValues(new Uint8Array(32)), id, "whd")).not.toBe(n);
      expect(rowOf(key, id, "tmr")).toBeNull();
    }
  });

  test("tells nothing of the count: consecutive numbers give unrelated ids, and the prefix and time change them", () => {
    const tails = Array.from({ length: 1_000 }, (_, i) => rowId(key, "whd", i + 1, at).slice(14));
    expect(new Set(tails).size).toBe(tails.length);
    expect([...tails].sort()).not.toEqual(tails);
    expect(rowId(key, "tmr", 7, at).slice(14)).not.toBe(rowId(key, "whd", 7, at).slice(14));
    expect(rowId(key, "whd", 7, new Date(at.getTime() + 1)).slice(14)).not.toBe(
      rowId(key, "whd", 7, at).slice(14),
    );
  });

  test("an id altered in its time or its number names another row, or none; malformed ids none", () => {
    const id = rowId(key, "whd", 42, at);
    const retimed = `${id.slice(0, 13)}${id[13] === "0" ? "1" : "0"}${id.slice(14)}`;
    const renumbered = `${id.slice(0, 29)}${id[29] === "0" ? "1" : "0"}`;
    for (const other of [retimed, renumbered]) expect(rowOf(key, other, "whd")).not.toBe("42");
    for (const bad of ["whd_x", "whd_00000000000000000000000000", `${id}0`, id.toLowerCase()]) {
      expect(rowOf(key, bad, "whd")).not.toBe("42");
    }
  });
});
