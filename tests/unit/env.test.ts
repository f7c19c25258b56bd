import { describe, expect, test } from "bun:test";
import { livekitMissing, parseEnv } from "../../src/env.ts";

/** parseEnv's verdict on one variable: its value, or the error message. */
function read(name: string, value: string): unknown {
  try {
    return (parseEnv({ [name]: value }) as Record<string, unknown>)[name];
  } catch (err) {
    return (err as Error).message;
  }
}

function refused(name: string, value: string): string {
  const message = read(name, value);
  expect(typeof message === "string" && message.startsWith(`invalid environment: ${name}`)).toBe(true);
  return message as string;
}

describe("numbers are plain decimal text", () => {
  test.each([
    ["0x1F90"],
    ["1e3"],
    ["8080.0"],
    ["8080.5"],
    ["80 80"],
    ["+8080"],
    ["-1"],
    ["65536"],
    ["Infinity"],
    ["0b1"],
    ["8_080"],
  ])("PORT=%j is refused", (value) => {
    expect(refused("PORT", value)).toContain("PORT must be a whole number");
  });

  test("PORT: decimal digits from 0 to 65535; empty means the default", () => {
    expect(read("PORT", "0")).toBe(0);
    expect(read("PORT", "8081")).toBe(8081);
    expect(read("PORT", "65535")).toBe(65535);
    // Space around the digits (a quoted value in an env file, a CRLF line's carriage return) is read.
    expect(read("PORT", " 8080")).toBe(8080);
    expect(read("PORT", "8080\r")).toBe(8080);
    expect(read("RECAPTCHA_MIN_SCORE", " 0.5 ")).toBe(0.5);
    expect(read("PORT", "")).toBe(8080);
    expect(parseEnv({}).PORT).toBe(8080);
  });

  test.each([["1e1"], ["10.5"], ["0x10"], ["0"], ["3651"], ["-5"], ["1 0"]])(
    "EVENT_RETENTION_DAYS=%j is refused",
    (value) => {
      expect(refused("EVENT_RETENTION_DAYS", value)).toContain("EVENT_RETENTION_DAYS must be a whole number");
    },
  );

  test("EVENT_RETENTION_DAYS: decimal digits from 1 to 3650", () => {
    expect(read("EVENT_RETENTION_DAYS", "1")).toBe(1);
    expect(read("EVENT_RETENTION_DAYS", "90")).toBe(90);
    expect(parseEnv({}).EVENT_RETENTION_DAYS).toBe(30);
  });

  test.each([
    ["1e-1"],
    ["5e-1"],
    ["0x0"],
    ["-0.1"],
    ["1.5"],
    ["2"],
    ["."],
    ["0."],
    ["0,5"],
    ["0. 5"],
    ["NaN"],
  ])("RECAPTCHA_MIN_SCORE=%j is refused", (value) => {
    expect(refused("RECAPTCHA_MIN_SCORE", value)).toContain("RECAPTCHA_MIN_SCORE must be a decimal number");
  });

  test("RECAPTCHA_MIN_SCORE: a decimal number from 0 to 1", () => {
    expect(read("RECAPTCHA_MIN_SCORE", "0.5")).toBe(0.5);
    expect(read("RECAPTCHA_MIN_SCORE", ".7")).toBe(0.7);
    expect(read("RECAPTCHA_MIN_SCORE", "0")).toBe(0);
    expect(read("RECAPTCHA_MIN_SCORE", "1")).toBe(1);
    expect(read("RECAPTCHA_MIN_SCORE", "1.0")).toBe(1);
    expect(parseEnv({}).RECAPTCHA_MIN_SCORE).toBe(0.5);
  });

  test.each([["1e-2"], ["0"], ["0.0"], ["-1"], ["0x1"], ["Infinity"]])(
    "SIMULATION_TIME_SCALE=%j is refused",
    (value) => {
      expect(refused("SIMULATION_TIME_SCALE", value)).toContain(
        "SIMULATION_TIME_SCALE must be a decimal number",
      );
    },
  );

  test("SIMULATION_TIME_SCALE: a positive decimal number", () => {
    expect(read("SIMULATION_TIME_SCALE", "0.01")).toBe(0.01);
    expect(read("SIMULATION_TIME_SCALE", ".5")).toBe(0.5);
    expect(read("SIMULATION_TIME_SCALE", "10")).toBe(10);
    expect(parseEnv({}).SIMULATION_TIME_SCALE).toBe(1);
  });
});

describe("DATABASE_URL", () => {
  test("a PostgreSQL URL is taken; anything else is refused by name, without repeating the value", () => {
    for (const url of [
      "postgres://voice@127.0.0.1:5432/voice",
      "postgresql://u:p@db/x",
      "postgres:///voice?host=/run",
    ]) {
      expect(parseEnv({ DATABASE_URL: url }).DATABASE_URL).toBe(url);
    }
    for (const value of ["notaurl", "mysql://root:hunter22@db/x", "127.0.0.1:5432/voice:hunter22"]) {
      const message = refused("DATABASE_URL", value);
      expect(message).toContain("must be a PostgreSQL URL");
      expect(message).not.toContain("hunter22");
    }
  });
});

describe("whitespace", () => {
  test("a number made only of whitespace is refused, never read as 0", () => {
    for (const name of ["PORT", "EVENT_RETENTION_DAYS", "RECAPTCHA_MIN_SCORE", "SIMULATION_TIME_SCALE"]) {
      for (const value of [" ", "\t", " \n "]) {
        expect(refused(name, value)).toBe(
          `invalid environment: ${name} is only whitespace: leave it empty or unset for the default`,
        );
      }
    }
  });

  test("empty is unset; a value made only of whitespace is refused, for every variable", () => {
    expect(parseEnv({ HOST: "", DATABASE_URL: "", PORT: "" })).toMatchObject({
      HOST: "127.0.0.1",
      PORT: 8080,
    });
    for (const name of ["HOST", "DATABASE_URL", "DATA_DIR", "RECAPTCHA_SECRET", "TRUST_PROXY", "LOG_LEVEL"]) {
      expect(refused(name, "  ")).toContain(`${name} is only whitespace`);
    }
  });

  test("variables the service does not read are left alone", () => {
    expect(() => parseEnv({ SOMETHING_ELSE: "   ", PATH: " " })).not.toThrow();
  });

  test("every fault is reported at once", () => {
    const message = (() => {
      try {
        parseEnv({ PORT: " ", HOST: " ", EVENT_RETENTION_DAYS: "1e1" });
      } catch (err) {
        return (err as Error).message;
      }
    })();
    expect(message).toContain("PORT");
    expect(message).toContain("HOST");
    expect(message).toContain("EVENT_RETENTION_DAYS");
  });
});

describe("ADMIN_TOKEN", () => {
  const good = "adm_0123456789abcdefghijklmnopqrstuvwxyz";

  test("at least 32 printable ASCII characters without whitespace", () => {
    expect(read("ADMIN_TOKEN", good)).toBe(good);
    expect(read("ADMIN_TOKEN", "!~".repeat(16))).toBe("!~".repeat(16));
    expect(refused("ADMIN_TOKEN", "short")).toContain("ADMIN_TOKEN must be at least 32 characters");
  });

  test.each([
    ["made of spaces", " ".repeat(40)],
    ["with a space", `${good.slice(0, 20)} ${good.slice(20)}`],
    ["with a tab", `${good}\tmore`],
    ["with a leading space", ` ${good}`],
    ["with a trailing newline", `${good}\n`],
    ["with a non-ASCII letter", `${good}é`],
    ["with a control character", `${good}\u0007`],
  ])("a token %s can never authenticate and is refused", (_name, value) => {
    const message = refused("ADMIN_TOKEN", value);
    expect(message).toMatch(/ADMIN_TOKEN (is only whitespace|must be printable ASCII)/);
    expect(message).not.toContain(good);
  });
});

describe("LiveKit", () => {
  const url = "wss://media.example.com";
  test("all three or none: nothing is missing", () => {
    expect(livekitMissing(parseEnv({}))).toEqual([]);
    expect(
      livekitMissing(parseEnv({ LIVEKIT_URL: url, LIVEKIT_API_KEY: "k", LIVEKIT_API_SECRET: "s" })),
    ).toEqual([]);
  });

  test("a partial configuration names the missing variables", () => {
    expect(livekitMissing(parseEnv({ LIVEKIT_URL: url, LIVEKIT_API_KEY: "k" }))).toEqual([
      "LIVEKIT_API_SECRET",
    ]);
    expect(livekitMissing(parseEnv({ LIVEKIT_API_SECRET: "s" }))).toEqual(["LIVEKIT_URL", "LIVEKIT_API_KEY"]);
    expect(livekitMissing(parseEnv({ LIVEKIT_URL: url, LIVEKIT_API_SECRET: "" }))).toEqual([
      "LIVEKIT_API_KEY",
      "LIVEKIT_API_SECRET",
    ]);
  });
});
