import { z } from "@hono/zod-openapi";
import { LIMIT_MAX } from "../db/engine/pages.ts";
import { ApiError } from "../errors.ts";
import type { App } from "../http/appEnv.ts";
import { type IdPrefix, isAnyId, isId } from "../ids.ts";
import { canonicalNumber } from "../phoneNumbers.ts";
import { E164 } from "../schemas.ts";

/**
 * The one cursor list convention:
 * - query: `limit` 1–100 (default 20), `starting_after` = id of the last item of the previous page,
 *   plus the list's own filters; anything else is refused (400 `invalid_query` with `param`);
 * - answer: `{data, has_more}`, newest first in the total order (created_at desc, id desc), so items
 *   with equal timestamps are neither repeated nor skipped;
 * - keyset pagination (db/engine/pages.ts): a page is `where <scope> and (created_at, id) < (cursor) order by … limit n+1`
 *   on an index (<scope columns>, created_at desc, id desc): page 5,000 costs what page 1 costs;
 * - a cursor outside the list (unknown, deleted, foreign, other mode, other filters, other resource
 *   type) is 400 `invalid_cursor`, never an empty page; a malformed one is 400 `invalid_query`.
 * Items created during a walk get a created_at no earlier than the existing ones and a larger id, so
 * they sort before its first page: a walk returns every item that existed when it began exactly once
 * (unless deleted meanwhile).
 */

export const LIMIT_DEFAULT = 20;

/**
 * One value of a query parameter. A repeated parameter reaches the validator as an array and is
 * refused rather than guessed. Messages read after the parameter name (`limit: must be …`).
 */
export function queryValue(what = "a string") {
  return z.string({ error: (iss) => (Array.isArray(iss.input) ? "must be given once" : `must be ${what}`) });
}

const LIMIT_RE = /^[0-9]{1,4}$/;

export const limitParam = queryValue("an integer from 1 to 100")
  .optional()
  .transform((v, ctx) => {
    if (v === undefined) return LIMIT_DEFAULT;
    const n = LIMIT_RE.test(v) ? Number(v) : Number.NaN;
    if (!Number.isInteger(n) || n < 1 || n > LIMIT_MAX) {
      ctx.addIssue({ code: "custom", message: `must be an integer from 1 to ${LIMIT_MAX}` });
      return z.NEVER;
    }
    return n;
  })
  .openapi("Limit", {
    param: { name: "limit", in: "query" },
    type: "integer",
    minimum: 1,
    maximum: LIMIT_MAX,
    default: LIMIT_DEFAULT,
    description: `Number of items to return, 1 to ${LIMIT_MAX}. Default ${LIMIT_DEFAULT}.`,
  });

export const startingAfterParam = queryValue("an object id")
  .optional()
  .refine((v) => v === undefined || isAnyId(v), {
    message: "must be the id of an object, such as ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
  })
  .openapi("StartingAfter", {
    param: { name: "starting_after", in: "query" },
    description:
      "The `id` of the last item of the previous page. It must belong to the list being read (same " +
      "organization, mode and filters): otherwise 400 `invalid_cursor`. A malformed value is 400 `invalid_query`.",
    example: "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
    pattern: "^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$",
  });

/** `livemode` query value: exactly `true` or `false`. */
export const livemodeParam = queryValue("true or false")
  .optional()
  .refine((v) => v === undefined || v === "true" || v === "false", { message: "must be true or false" })
  .transform((v) => (v === undefined ? undefined : v === "true"))
  .openapi("Livemode", {
    param: { name: "livemode", in: "query" },
    type: "boolean",
    description:
      "Must match the mode of the key: `false` for test keys, `true` for live keys; otherwise 400 `invalid_query`.",
  });

/** An optional filter taking one of `values`. */
export function enumFilter<const T extends readonly [string, ...string[]]>(values: T, description: string) {
  return z
    .enum(values, {
      error: (iss) =>
        Array.isArray(iss.input) ? "must be given once" : `must be one of ${values.join(", ")}`,
    })
    .optional()
    .openapi({ description });
}

/** An optional free-text filter (exact match), at most `max` characters. */
export function textFilter(description: string, max = 255) {
  return queryValue(`a string of 1 to ${max} characters`)
    .min(1, { message: "must not be empty" })
    .max(max, { message: `must be at most ${max} characters` })
    .optional()
    .openapi({ description });
}

/**
 * An optional filter on the id of another object (`agt_…`, `cmp_…`): a value that cannot be one is
 * 400 `invalid_query` naming it, like a malformed cursor; an id of none of the organization's objects
 * is an empty list.
 */
export function idFilter(prefix: IdPrefix, description: string) {
  const example = `${prefix}_01JD8Y3M6W9Q2T4V5X7Z8A9B0C`;
  return queryValue(`an id such as ${example}`)
    .refine((v) => isId(v, prefix), { message: `must be an id such as ${example}` })
    .optional()
    .openapi({ type: "string", description, example });
}

/** An optional filter on an E.164 phone number (exact match). */
export function phoneFilter(description: string) {
  return (
    queryValue("a phone number in E.164 format")
      // A `+` left unencoded in a query string arrives as a space; read it as the `+` it was meant to be.
      .transform((v) => v.replace(/^ (?=[0-9])/, "+"))
      .refine((v) => E164.test(v), {
        message: "must be a phone number in E.164 format, such as +33612345678 (encode + as %2B)",
      })
      // Compared in the one spelling the numbers are stored in.
      .transform(canonicalNumber)
      .optional()
      .openapi({ type: "string", description: `${description} (E.164; encode \`+\` as \`%2B\`).` })
  );
}

/** The query schema of a list: the convention plus the list's own filters. Unknown parameters are refused. */
export function listQuery<T extends z.ZodRawShape>(filters: T) {
  return z.object({ limit: limitParam, starting_after: startingAfterParam, ...filters }).strict();
}

/** The envelope of a list, the same shape for every item type, named once per item type in the OpenAPI. */
export function listEnvelope<T extends z.ZodType>(item: T, name: string) {
  return z
    .object({
      data: z.array(item).openapi({ description: "Items, newest first." }),
      has_more: z
        .boolean()
        .openapi({ description: "true when another page exists: repeat with `starting_after` = last id." }),
    })
    .openapi(name, {
      description: "One page of a cursor-paginated list, newest first.",
    });
}

/**
 * Registers `limit`, `starting_after` and `livemode` once under `components/parameters`; every list
 * route then refers to them, so the OpenAPI shows the convention once and identically.
 */
export function registerListConvention(app: App): void {
  app.openAPIRegistry.registerParameter("Limit", limitParam);
  app.openAPIRegistry.registerParameter("StartingAfter", startingAfterParam);
  app.openAPIRegistry.registerParameter("Livemode", livemodeParam);
}

/** 400 `invalid_query` when a `livemode` filter contradicts the key's mode (lists show the key's mode only). */
export function assertLivemodeMatches(requested: boolean | undefined, keyLivemode: boolean): void {
  if (requested !== undefined && requested !== keyLivemode) {
    throw new ApiError(
      "invalid_query",
      `livemode: this key only sees objects with livemode ${keyLivemode}.`,
      {
        param: "livemode",
      },
    );
  }
}
