import { z } from "zod";
import { E164 } from "./schemas.ts";

const bool = z
  .enum(["true", "false", "1", "0", ""])
  .optional()
  .transform((v) => v === "true" || v === "1");

/** The environment (every setting of the service), parsed once at start. */
export const EnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default("127.0.0.1"),
  DATABASE_URL: z.string().min(1).optional(),
  DATA_DIR: z.string().min(1).default("./data"),
  ADMIN_TOKEN: z.string().min(32, "ADMIN_TOKEN must be at least 32 characters").optional(),
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
  RECAPTCHA_MIN_SCORE: z.coerce.number().min(0).max(1).default(0.5),
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
  SIMULATION_TIME_SCALE: z.coerce.number().positive().default(1),
  WEBHOOK_ALLOW_PRIVATE_URLS: bool,
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
  EVENT_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  DEMO: bool,
});

export type Env = z.infer<typeof EnvSchema>;

/** Parses the environment; empty strings count as unset. Throws a readable message on bad values. */
export function parseEnv(source: Record<string, string | undefined>): Env {
  const cleaned = Object.fromEntries(Object.entries(source).filter(([, v]) => v !== undefined && v !== ""));
  const result = EnvSchema.safeParse(cleaned);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid environment: ${lines.join("; ")}`);
  }
  return result.data;
}
