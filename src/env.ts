import { z } from "zod";
import { E164 } from "./schemas.ts";

/**
 * Digits only: no sign, exponent, hexadecimal or separator. Space around them is allowed (a value
 * quoted with spaces in an env file, the carriage return of a CRLF line); a value of only space is not.
 */
const INTEGER = /^\s*\d+\s*$/;
/** Digits with an optional decimal point followed by digits (`0.5`, `.5`, `1`), space around allowed. */
const DECIMAL = /^\s*(?:\d+(?:\.\d+)?|\.\d+)\s*$/;

/** A whole number written in decimal digits, from `min` to `max`. */
function wholeNumber(name: string, min: number, max: number, fallback: number) {
  return z
    .string()
    .refine(
      (v) => INTEGER.test(v) && Number(v) >= min && Number(v) <= max,
      `${name} must be a whole number from ${min} to ${max}, in decimal digits (such as ${fallback})`,
    )
    .transform(Number)
    .default(fallback);
}

/** A number written in decimal digits with an optional decimal point, within `range`. */
function decimalNumber(name: string, range: string, accepts: (n: number) => boolean, example: string) {
  return z
    .string()
    .refine(
      (v) => DECIMAL.test(v) && accepts(Number(v)),
      `${name} must be a decimal number ${range}, in digits with an optional decimal point (such as ${example})`,
    )
    .transform(Number);
}

/**
 * Printable ASCII without spaces: the token travels as `Authorization: Bearer <token>`, and a token
 * with a space or a character outside ASCII could never be presented.
 */
const TOKEN_CHARACTERS = /^[\x21-\x7e]*$/;

const bool = z
  .enum(["true", "false", "1", "0", ""])
  .optional()
  .transform((v) => v === "true" || v === "1");

/** Whether `value` is a URL of the `postgres:` (or `postgresql:`) scheme. Its text is never repeated. */
function isPostgresUrl(value: string): boolean {
  try {
    const { protocol } = new URL(value);
    return protocol === "postgres:" || protocol === "postgresql:";
  } catch {
    return false;
  }
}

/** The environment (every setting of the service), parsed once at start. */
export const EnvSchema = z.object({
  PORT: wholeNumber("PORT", 0, 65535, 8080),
  HOST: z.string().min(1).default("127.0.0.1"),
  DATABASE_URL: z
    .string()
    .min(1)
    .refine(
      isPostgresUrl,
      "DATABASE_URL must be a PostgreSQL URL, such as postgres://voice@127.0.0.1:5432/voice",
    )
    .optional(),
  DATA_DIR: z.string().min(1).default("./data"),
  ADMIN_TOKEN: z
    .string()
    .min(32, "ADMIN_TOKEN must be at least 32 characters")
    .regex(
      TOKEN_CHARACTERS,
      "ADMIN_TOKEN must be printable ASCII without spaces (it is sent as `Authorization: Bearer <ADMIN_TOKEN>`)",
    )
    .optional(),
  TRUST_PROXY: z
    .string()
    .optional()
    .transform((v) =>
      v
        ? v
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean)
        : [],
    ),
  RECAPTCHA_SECRET: z.string().min(1).optional(),
  RECAPTCHA_VERIFY_URL: z.string().url().default("https://www.google.com/recaptcha/api/siteverify"),
  RECAPTCHA_MIN_SCORE: decimalNumber("RECAPTCHA_MIN_SCORE", "from 0 to 1", (n) => n <= 1, "0.5").default(0.5),
  LIVEKIT_URL: z.string().url().optional(),
  LIVEKIT_API_KEY: z.string().min(1).optional(),
  LIVEKIT_API_SECRET: z.string().min(1).optional(),
  /** Default outbound SIP trunk of live phone calls (`ST_…`), for organizations without their own. */
  LIVEKIT_SIP_TRUNK_ID: z.string().min(1).optional(),
  /** Default caller number of live phone calls (E.164), for organizations without their own. */
  LIVEKIT_SIP_FROM_NUMBER: z
    .string()
    .regex(E164, "LIVEKIT_SIP_FROM_NUMBER must be a phone number in E.164 format, such as +33180000000")
    .optional(),
  SIMULATION_TIME_SCALE: decimalNumber("SIMULATION_TIME_SCALE", "above 0", (n) => n > 0, "0.01").default(1),
  WEBHOOK_ALLOW_PRIVATE_URLS: bool,
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
  EVENT_RETENTION_DAYS: wholeNumber("EVENT_RETENTION_DAYS", 1, 3650, 30),
  DEMO: bool,
});

export type Env = z.infer<typeof EnvSchema>;

/**
 * Parses the environment's variables of the service (others are ignored). An empty value counts as
 * unset (the default applies); a value made only of whitespace is refused, as it is surely a mistake
 * (`PORT=" "` is neither 8080 nor 0). Throws one readable message naming every bad variable, never
 * its value. TRUST_PROXY's entries are checked by main.ts (http/clientAddress.ts parses them).
 */
export function parseEnv(source: Record<string, string | undefined>): Env {
  const problems: string[] = [];
  const given: Record<string, string> = {};
  for (const name of Object.keys(EnvSchema.shape)) {
    const value = source[name];
    if (value === undefined || value === "") continue;
    if (value.trim() === "")
      problems.push(`${name} is only whitespace: leave it empty or unset for the default`);
    else given[name] = value;
  }
  const result = EnvSchema.safeParse(given);
  if (!result.success) {
    for (const issue of result.error.issues) {
      const name = issue.path.join(".");
      problems.push(issue.message.startsWith(name) ? issue.message : `${name}: ${issue.message}`);
    }
  }
  if (problems.length > 0 || !result.success) throw new Error(`invalid environment: ${problems.join("; ")}`);
  return result.data;
}

const LIVEKIT_VARIABLES = ["LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET"] as const;

/**
 * The LiveKit variables missing from a partial configuration (some set, not all), which counts as
 * none at all; empty when all three or none are set.
 */
export function livekitMissing(env: Pick<Env, (typeof LIVEKIT_VARIABLES)[number]>): string[] {
  const missing = LIVEKIT_VARIABLES.filter((name) => !env[name]);
  return missing.length === LIVEKIT_VARIABLES.length ? [] : missing;
}
