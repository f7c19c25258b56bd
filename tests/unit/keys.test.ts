import { describe, expect, test } from "bun:test";
import { generateKey, keyKind, randomBase62, sha256, timingSafeEqual } from "../../src/auth/keys.ts";
import { createLogger, redact } from "../../src/log.ts";

describe("keys", () => {
  test("each kind has its prefix, 43 base62 characters (256 bits) and only its hash is kept", async () => {
    for (const [kind, prefix] of [
      ["live", "inf_live_"],
      ["test", "inf_test_"],
      ["publishable", "inf_pub_"],
      ["sessionToken", "inf_wcs_"],
    ] as const) {
      const k = await generateKey(kind);
      expect(k.key.startsWith(prefix)).toBe(true);
      expect(k.key.slice(prefix.length)).toMatch(/^[0-9A-Za-z]{43}$/);
      expect(keyKind(k.key)).toBe(kind);
      expect(timingSafeEqual(k.hash, sha256(k.key))).toBe(true);
      expect(k.start.length).toBeLessThan(prefix.length + 6);
    }
  });

  test("sha256 is SHA-256 of the UTF-8 text, byte for byte what Web Crypto gives (hashes stored earlier still match)", async () => {
    const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
    expect(hex(sha256("abc"))).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    for (const text of [
      "",
      "inf_wcs_0123456789abcdefghijABCDEFGHIJklmnopqrstu",
      "é→✓ 😀",
      "x".repeat(10_000),
    ]) {
      const web = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
      expect(hex(sha256(text))).toBe(hex(web));
      expect(sha256(text).length).toBe(32);
    }
  });

  test("keys are distinct and use the whole alphabet", () => {
    const seen = new Set<string>();
    const chars = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      const s = randomBase62(43);
      seen.add(s);
      for (const ch of s) chars.add(ch);
    }
    expect(seen.size).toBe(2_000);
    expect(chars.size).toBe(62);
  });

  test("keyKind refuses malformed keys", () => {
    expect(keyKind("inf_live_short")).toBeNull();
    expect(keyKind(`inf_live_${"a".repeat(42)}!`)).toBeNull();
    expect(keyKind(`inf_nope_${"a".repeat(43)}`)).toBeNull();
    expect(keyKind("")).toBeNull();
  });

  test("timingSafeEqual compares whole arrays", () => {
    expect(timingSafeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2]))).toBe(true);
    expect(timingSafeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 3]))).toBe(false);
    expect(timingSafeEqual(new Uint8Array([1]), new Uint8Array([1, 2]))).toBe(false);
  });
});

describe("logger", () => {
  test("writes JSON lines at or above its level and masks anything shaped like a secret", async () => {
    const lines: string[] = [];
    const log = createLogger("info", (l) => lines.push(l));
    const key = (await generateKey("live")).key;
    log.debug("hidden");
    log.info("shown", { note: `oops ${key}`, hook: "whsec_abcdefABCDEF0123456789abcdef012345" });
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0]!);
    expect(entry).toMatchObject({ level: "info", msg: "shown" });
    expect(lines[0]).not.toContain(key);
    expect(lines[0]).not.toContain("whsec_abcdef");
    expect(redact(`a inf_wcs_${"x".repeat(43)} b`)).toBe("a inf_wcs_[redacted] b");
  });
});
