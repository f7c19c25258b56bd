import { z } from "@hono/zod-openapi";
import { canonicalNumber, hasCallingCode } from "./phoneNumbers.ts";

/** Value shapes shared by several resources: one definition each. */

/** A time in an answer: ISO 8601 UTC with milliseconds, the one format of every timestamp. */
export const Timestamp = z.string().openapi({ format: "date-time", example: "2026-11-21T09:30:00.000Z" });

/**
 * An object's last change. Strictly increasing per object (two changes in one millisecond still differ),
 * so it orders the events of one object, which webhook deliveries do not.
 */
export const UpdatedAt = Timestamp.openapi({
  description:
    "When the object last changed: strictly increasing across its changes, so the event whose `data` has " +
    "the latest `updatedAt` holds the object as it now stands.",
  example: "2026-11-21T09:30:05.000Z",
});

/** E.164: a plus sign, a country code not starting with 0, 7 to 15 digits in all, nothing else. */
export const E164 = /^\+[1-9][0-9]{6,14}$/;

export const PhoneSchema = z
  .string({ error: (iss) => (iss.input === undefined ? "is required" : "must be a string") })
  .regex(E164, { message: "must be a phone number in E.164 format, such as +33612345678" })
  .refine(hasCallingCode, {
    message: "must start with a country calling code that exists, such as +33 or +1",
    abort: true,
  })
  .overwrite(canonicalNumber)
  .openapi({
    description:
      "E.164, with a country calling code that exists. Stored in its one spelling: a national prefix written " +
      "after the country code is dropped.",
    example: "+33612345678",
  });

export const FLAT_MAX_KEYS = 50;
export const FLAT_MAX_KEY_LENGTH = 64;
export const FLAT_MAX_STRING_LENGTH = 1000;

export type FlatValue = string | number | boolean | null;
export type FlatObject = Record<string, FlatValue>;

/**
 * Keys an object cannot hold as its own once parsed: the record parser skips them (assigning one to a
 * plain object would replace its prototype), so they would be dropped without a word.
 */
const UNKEEPABLE_KEYS = new Set(["__proto__"]);

/**
 * The rules of a flat object as the document states them to integrators and their validators
 * (`propertyNames`, JSON Schema's, is not in the metadata's type: hence a value, not a literal).
 */
const flatObjectDocument = {
  maxProperties: FLAT_MAX_KEYS,
  propertyNames: { minLength: 1, maxLength: FLAT_MAX_KEY_LENGTH },
  additionalProperties: {
    anyOf: [
      { type: "string" as const, maxLength: FLAT_MAX_STRING_LENGTH },
      { type: "number" as const },
      { type: "boolean" as const },
      { type: "null" as const },
    ],
  },
};

/**
 * A flat object (a call's or session token's `variables`, a contact's `metadata`): at most 50 keys of 1–64
 * characters; values string (≤ 1,000 characters), finite number, boolean or null. The first fault
 * is reported with its key as the parameter (e.g. `variables.orderId`). Every key is kept exactly as
 * sent, or the object is refused: a key that cannot be kept is checked on the input, before the
 * record is built without it.
 */
export const FlatObjectSchema = z
  .preprocess(
    (input, ctx) => {
      if (typeof input !== "object" || input === null) return input;
      for (const key of Object.keys(input)) {
        if (UNKEEPABLE_KEYS.has(key)) {
          ctx.issues.push({
            code: "custom",
            message: `the key "${key}" cannot be used; choose another name`,
            path: [key],
            input,
          });
          return z.NEVER;
        }
      }
      return input;
    },
    z.record(z.string(), z.unknown(), { error: "must be an object of simple values" }),
  )
  .superRefine((value, ctx) => {
    const keys = Object.keys(value);
    if (keys.length > FLAT_MAX_KEYS) {
      ctx.addIssue({ code: "custom", message: `must have at most ${FLAT_MAX_KEYS} keys`, path: [] });
      return;
    }
    for (const key of keys) {
      if (key.length === 0 || key.length > FLAT_MAX_KEY_LENGTH) {
        ctx.addIssue({
          code: "custom",
          message: `keys must have 1 to ${FLAT_MAX_KEY_LENGTH} characters`,
          path: [key],
        });
        return;
      }
      const v = value[key];
      const flat =
        v === null ||
        typeof v === "boolean" ||
        (typeof v === "number" && Number.isFinite(v)) ||
        (typeof v === "string" && v.length <= FLAT_MAX_STRING_LENGTH);
      if (!flat) {
        ctx.addIssue({
          code: "custom",
          message:
            typeof v === "string"
              ? `must not exceed ${FLAT_MAX_STRING_LENGTH} characters`
              : "must be a string, number, boolean or null (the object is flat)",
          path: [key],
        });
        return;
      }
    }
  })
  .transform((v) => v as FlatObject)
  .openapi(flatObjectDocument);

/**
 * A BCP 47 language tag (`en`, `fr`, `fr-CA`, `pt-BR`, `zh-Hant-TW`), checked and canonicalised by the
 * runtime's own list of locales (`fr-ca` becomes `fr-CA`). Stored as canonicalised.
 */
export const LanguageTagSchema = z
  .string({ error: (iss) => (iss.input === undefined ? "is required" : "must be a string") })
  .max(64, { message: "must be at most 64 characters" })
  .transform((value, ctx) => {
    try {
      const [canonical] = Intl.getCanonicalLocales(value);
      if (canonical) return canonical;
    } catch {}
    ctx.addIssue({
      code: "custom",
      message: `"${value}" is not a BCP 47 language tag such as en, fr or fr-CA`,
    });
    return z.NEVER;
  })
  .openapi({ type: "string", description: "A BCP 47 language tag.", example: "fr-CA" });
