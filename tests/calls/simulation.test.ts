import { describe, expect, test } from "bun:test";
import { drawDurationSeconds, pickLanguage, simulateOutcome } from "../../src/simulation/content.ts";

const at = new Date("2026-11-21T09:30:00.000Z");

describe("fictitious content of simulated calls", () => {
  test("durations are 30–89 s, deterministic per call, and spread over the range", () => {
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const d = drawDurationSeconds(`call_${i}`);
      expect(d).toBeGreaterThanOrEqual(30);
      expect(d).toBeLessThanOrEqual(89);
      expect(drawDurationSeconds(`call_${i}`)).toBe(d);
      seen.add(d);
    }
    expect(seen.size).toBe(60);
  });

  test("the same call always gets the same content; different calls get varied content", () => {
    const a = simulateOutcome({ seed: "call_X", language: "en", durationSeconds: 45, at });
    expect(simulateOutcome({ seed: "call_X", language: "en", durationSeconds: 45, at })).toEqual(a);
    const summaries = new Set<string>();
    const reasons = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const o = simulateOutcome({
        seed: `call_${i}`,
        language: i % 2 ? "fr" : "en",
        durationSeconds: 60,
        at,
      });
      summaries.add(o.summary);
      reasons.add(o.collectedData.reason);
    }
    expect(summaries.size).toBeGreaterThan(150);
    expect(reasons.size).toBeGreaterThan(20);
  });

  test("segments alternate speakers with offsets increasing within the call", () => {
    for (let i = 0; i < 300; i++) {
      const duration = 30 + (i % 60);
      const o = simulateOutcome({ seed: `call_${i}`, language: "fr", durationSeconds: duration, at });
      expect(o.segments[0]!.speaker).toBe("agent");
      for (let j = 1; j < o.segments.length; j++) {
        expect(o.segments[j]!.offsetSeconds).toBeGreaterThan(o.segments[j - 1]!.offsetSeconds);
        expect(o.segments[j]!.speaker).not.toBe(o.segments[j - 1]!.speaker);
      }
      expect(o.segments.at(-1)!.offsetSeconds).toBeLessThan(duration);
    }
  });

  test("appointment_date is a weekday a few days after the call, and the reason is in the call's language", () => {
    for (let i = 0; i < 100; i++) {
      const o = simulateOutcome({ seed: `c${i}`, language: "fr", durationSeconds: 40, at });
      const d = new Date(`${o.collectedData.appointment_date}T00:00:00Z`);
      expect(d.getTime()).toBeGreaterThan(at.getTime());
      expect(d.getTime() - at.getTime()).toBeLessThan(25 * 86_400_000);
      expect([0, 6]).not.toContain(d.getUTCDay());
      expect(o.summary).toContain(o.collectedData.reason);
      expect(o.summary).toMatch(/a pris rendez-vous auprès (du|de la) /);
    }
  });

  test("the `language` variable wins over the agent's language", () => {
    expect(pickLanguage({ language: "fr" }, "en")).toBe("fr");
    expect(pickLanguage({ language: "FR-ca" }, "en")).toBe("fr");
    expect(pickLanguage({ language: "en-GB" }, "fr")).toBe("en");
    expect(pickLanguage({ language: "de" }, "fr")).toBe("fr");
    expect(pickLanguage({}, "fr")).toBe("fr");
    expect(pickLanguage(null, "en")).toBe("en");
  });
});
