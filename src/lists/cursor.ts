import { z } from "@hono/zod-openapi";
import type { Fragment, Sql } from "postgres";
import { ApiError } from "../errors.ts";
import { ID_PREFIXES, type IdPrefix, isAnyId, isId } from "../ids.ts";

/**
 * The one cursor list convention (SPEC.md "List convention"): `limit` 1–100 (default 20),
 * `starting_after` = id of the last item of the previous page, answer `{data, has_more}` newest
 * first. Keyset pagination on (created_at desc, id desc): page 5,000 costs what page 1 costs.
 */

const LIMIT_RE = /^[0-9]+$/;

export const limitParam = z
  .string()
  .optional()
  .transform((v, ctx) => {
    if (v === undefined) return 20;
    const n = LIMIT_RE.test(v) ? Number(v) : Number.NaN;
    if (!Number.isInteger(n) || n < 1 || n > 100) {
      ctx.addIssue({ code: "custom", message: "limit must be an integer between 1 and 100" });
      return z.NEVER;
    }
    return n;
  })
  .openapi({
    param: { name: "limit", in: "query" },
    type: "integer",
    minimum: 1,
    maximum: 100,
    default: 20,
    description: "Number of items to return, 1 to 100.",
  });

export const startingAfterParam = z
  .string()
  .optional()
  .refine((v) => v === undefined || isAnyId(v), { message: "starting_after must be an object id" })
  .openapi({
    param: { name: "starting_after", in: "query" },
    description: "The `id` of the last item of the previous page. It must belong to the list being read.",
    example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
  });

/** `livemode` query value: exactly `true` or `false`. */
export const livemodeParam = z
  .enum(["true", "false"], { message: "livemode must be true or false" })
  .optional()
  .transform((v) => (v === undefined ? undefined : v === "true"))
  .openapi({
    param: { name: "livemode", in: "query" },
    type: "boolean",
    description: "Must match the mode of the key: `false` for test keys, `true` for live keys.",
  });

/** The query schema of a list: the convention plus the list's own filters. Unknown parameters are refused. */
export function listQuery<T extends z.ZodRawShape>(filters: T) {
  return z.object({ limit: limitParam, starting_after: startingAfterParam, ...filters }).strict();
}

/** The envelope of a list, named once per item type in the OpenAPI document. */
export function listEnvelope<T extends z.ZodType>(item: T, name: string) {
  return z
    .object({
      data: z.array(item).openapi({ description: "Items, newest first." }),
      has_more: z.boolean().openapi({ description: "true when another page exists." }),
    })
    .openapi(name);
}

/** 400 `invalid_query` when a `livemode` filter contradicts the key's mode (SPEC.md rule 1). */
export function assertLivemodeMatches(requested: boolean | undefined, keyLivemode: boolean): void {
  if (requested !== undefined && requested !== keyLivemode) {
    throw new ApiError("invalid_query", `This key only sees objects with livemode ${keyLivemode}.`, {
      param: "livemode",
    });
  }
}

export interface PageRequest<Row> {
  sql: Sql;
  /** Table to read; must have `id` and `created_at` and an index on (<scope columns>, created_at desc, id desc). */
  table: string;
  /** The whole scope of the list: organization, mode and filters. The cursor must satisfy it too. */
  where: Fragment;
  /** Id prefix of the items; a cursor of another prefix is `invalid_cursor`. */
  prefix: IdPrefix;
  limit: number;
  startingAfter: string | undefined;
  columns?: Fragment;
  map?: (row: Row) => unknown;
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

/**
 * Reads one page. The cursor row is looked up within the same scope, so an unknown, deleted,
 * foreign, other-mode or out-of-filter cursor is `invalid_cursor`, never an empty page.
 * One extra row is read to know `has_more` without a count.
 */
export async function paginate<Row extends Record<string, unknown>, T = Row>(
  req: PageRequest<Row>,
): Promise<Page<T>> {
  const { sql, where, limit } = req;
  const table = sql(req.table);
  const columns = req.columns ?? sql`*`;
  let rows: Row[];
  if (req.startingAfter !== undefined) {
    const cursor = req.startingAfter;
    if (!isId(cursor, req.prefix)) throw invalidCursor();
    const [anchor] = await sql<{ created_at: Date; id: string }[]>`
      select created_at, id from ${table} where id = ${cursor} and ${where}`;
    if (!anchor) throw invalidCursor();
    rows = await sql<Row[]>`
      select ${columns} from ${table}
      where ${where} and (created_at, id) < (${anchor.created_at}, ${anchor.id})
      order by created_at desc, id desc
      limit ${limit + 1}`;
  } else {
    rows = await sql<Row[]>`
      select ${columns} from ${table}
      where ${where}
      order by created_at desc, id desc
      limit ${limit + 1}`;
  }
  const has_more = rows.length > limit;
  const page = has_more ? rows.slice(0, limit) : rows;
  const map = req.map ?? ((r: Row) => r as unknown as T);
  return { data: page.map((r) => map(r) as T), has_more };
}

function invalidCursor(): ApiError {
  return new ApiError("invalid_cursor", "starting_after does not belong to this list.", {
    param: "starting_after",
  });
}

export { ID_PREFIXES };
