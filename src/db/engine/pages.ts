import type { Fragment } from "postgres";
import { ApiError } from "../../errors.ts";
import { type IdPrefix, isId } from "../../ids.ts";
import type { Db } from "./connection.ts";

/**
 * Keyset pagination, the statement behind every cursor list (lists/cursor.ts is the convention): a page
 * is the rows of the list's scope before the cursor, newest first (created_at desc, id desc), read from
 * an index (<key columns>, created_at desc, id desc) one row at a time, so page 5,000 costs what page 1
 * costs, and a filter with its own index reads no row it does not return.
 */

/** The most items a page holds. */
export const LIMIT_MAX = 100;

/**
 * A column of a list's index before `created_at desc, id desc` (a name, or an expression such as
 * `lower(email)`), and the one value the list fixes it to.
 */
export type IndexKey = readonly [column: string | Fragment, value: string | boolean | Fragment];

/**
 * The rows of a list that one index holds in the list's order: `keys` fix the index's leading
 * columns, in the index's order (an index (…keys, created_at desc, id desc) must exist); `filter` is
 * anything else the list asks of a row, checked row by row within that range. A filter never narrows
 * what the walk reads, only what it keeps: each filter that can leave few rows of many deserves a key
 * (an index) of its own. A filter lowers the planner's estimate of the range even where it removes no
 * row, and with an estimate of a row or two it sorts the range rather than walking it: leave out what
 * always holds.
 *
 * `pinned`: the last key leads each probe's order (see `pageQuery`), so that no other index can serve
 * the probe. For a range whose table has another index that also yields the created_at order under
 * the other keys: the scope's index without the filter's column, or an index on created_at alone.
 */
export interface IndexRange {
  keys: readonly IndexKey[];
  pinned?: boolean | undefined;
  filter?: Fragment | undefined;
}

export interface PageRequest<Row> {
  sql: Db;
  /** Table to read; must have `id` and `created_at`. */
  table: string;
  /**
   * The whole scope of the list (organization, mode, filters) as index ranges whose union it is: one,
   * or one per agent of a key restricted to several (`agent_id = any(…)` on one index yields each
   * agent's rows in turn, not in time order, so a step would sort them all). Each step of the walk takes
   * the newest row across them, one ordered index probe per range. None: the list is empty. The
   * cursor must be in the scope too.
   */
  ranges: readonly IndexRange[];
  /** Id prefix of the items; a well-formed cursor of another prefix is `invalid_cursor`. */
  prefix: IdPrefix;
  limit: number;
  startingAfter: string | undefined;
  /** Columns to select (default `*`); must include what `map` reads. */
  columns?: Fragment;
  /** Builds the API object from a row, reading only the columns it needs. */
  map?: (row: Row) => unknown;
  /**
   * The `id` column's value behind a cursor, for tables whose ids are shown in another form (row ids
   * of numbered rows, ids.ts `rowId`); null when the cursor cannot be one of them. Default: the cursor.
   */
  cursorOf?: (id: string) => string | null;
}

/** A page as a list's query asks for it (lists/cursor.ts validates it). */
export interface PageInput {
  limit: number;
  starting_after?: string | undefined;
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

/**
 * The one statement that reads a page, exported so tests and benchmarks can EXPLAIN exactly what runs.
 *
 * It walks the scope's index one row at a time: the first row after the cursor (or the newest), then
 * each next one from the row before, every step an ordered probe `limit 1` of each range, until
 * `limit + 1` rows; then those rows are read by primary key. Each step can only be planned as an
 * ordered index scan that stops at its first row, whatever the planner believes of the table's size: a
 * plain `order by … limit n` is planned as a bitmap scan and a sort of every row after the cursor when
 * the statistics say the table is small (never analyzed, analyzed before it grew, one large
 * organization among many small ones), and each pooled connection keeps that plan.
 *
 * A probe of a pinned range orders by its last key, then created_at and id, and fixes that key by a
 * range (`>= v and <= v`) rather than `=` (a column equal to a constant drops out of the order). Only
 * the range's own index yields that order without sorting every row of the range, so the planner never
 * prefers another index that also orders by created_at (one on created_at alone, or the scope's index
 * without the filter's column, with the filter checked row by row): when the statistics make the filter
 * look like it keeps every row, those cost the same to it, and it took the smaller one and read every
 * row of other agents or statuses before the first that matched. The keys before the last stay
 * equalities, so that the index scan stops at the range's end (a key after an inequality does not).
 * Ranges are pinned only where another index competes: the planner's estimate of a range is poorer
 * than of an equality (a fixed fraction of the rows), and with too low an estimate it would rather
 * sort what it believes a handful of rows than walk the index.
 *
 * With a cursor, the anchor row is read within the same scope by a row subquery run once (an
 * InitPlan). An anchor that is not in the scope makes the comparison null, so the page is empty;
 * `paginate` tells that apart from a real last page.
 */
export function pageQuery<Row>(req: PageRequest<Row>): Fragment {
  const { sql, limit } = req;
  const table = sql(req.table);
  const ranges = req.ranges.length > 0 ? req.ranges : [{ keys: [], filter: sql`false` }];
  const anchor = anchorOf(req);
  const after =
    anchor === undefined
      ? sql``
      : sql`and (created_at, id) < (select created_at, id from ${table} where id = ${anchor} and ${scopeOf(sql, ranges)})`;
  // The limit is written into the statement (a checked integer, so ≤ 100 shapes per list): with a
  // parameter there, PostgreSQL cannot cost a generic plan and plans every execution afresh, which
  // costs more than running the page. Written in, the prepared statement's plan is made once.
  if (!Number.isInteger(limit) || limit < 1 || limit > LIMIT_MAX)
    throw new Error(`limit out of range: ${limit}`);
  const rows = sql.unsafe(String(limit + 1));
  // The newest row of the scope that satisfies `cond`: one ordered probe per range.
  const newest = (cond: Fragment) => {
    const probe = (range: IndexRange) => {
      const last = range.pinned ? range.keys.at(-1) : undefined;
      const order = last ? sql`${column(sql, last[0])}, ` : sql``;
      return sql`(select created_at, id from ${table} where ${rangeWhere(sql, range)} ${cond}
        order by ${order}created_at desc, id desc limit 1)`;
    };
    if (ranges.length === 1) return probe(ranges[0]!);
    const union = ranges.map(probe).reduce((all, one) => sql`${all} union all ${one}`);
    return sql`(select created_at, id from (${union}) ranges order by created_at desc, id desc limit 1)`;
  };
  return sql`
    with recursive walk (created_at, id, n) as (
      (select created_at, id, 1 from ${newest(after)} first)
      union all
      (select next.created_at, next.id, walk.n + 1 from walk,
        lateral ${newest(sql`and (created_at, id) < (walk.created_at, walk.id)`)} next
        where walk.n < ${rows})
    )
    select ${req.columns ?? sql`*`} from ${table}
    where id = any(array(select id from walk))
    order by created_at desc, id desc`;
}

const column = (sql: Db, c: string | Fragment): Fragment =>
  typeof c === "string" ? (sql(c) as unknown as Fragment) : c;

/** The rows of one range: its keys (the last as a range if pinned, see `pageQuery`) and its filter. */
function rangeWhere(sql: Db, range: IndexRange): Fragment {
  const parts = range.keys.map(([c, value], i) =>
    !range.pinned || i < range.keys.length - 1
      ? sql`${column(sql, c)} = ${value as string}`
      : sql`${column(sql, c)} >= ${value as string} and ${column(sql, c)} <= ${value as string}`,
  );
  if (range.filter) parts.push(range.filter);
  return parts.length ? parts.reduce((all, one) => sql`${all} and ${one}`) : sql`true`;
}

/** The whole scope, for reading one row of it by id. */
function scopeOf(sql: Db, ranges: readonly IndexRange[]): Fragment {
  if (ranges.length === 0) return sql`false`;
  return sql`(${ranges.map((r) => sql`(${rangeWhere(sql, r)})`).reduce((all, one) => sql`${all} or ${one}`)})`;
}

/**
 * Reads one page. An unknown, deleted, foreign, other-mode or out-of-filter cursor is
 * `invalid_cursor`, never an empty page. One extra row is read to know `has_more` without a count.
 */
export async function paginate<Row extends object, T = Row>(req: PageRequest<Row>): Promise<Page<T>> {
  if (req.startingAfter !== undefined && (!isId(req.startingAfter, req.prefix) || anchorOf(req) === null)) {
    throw invalidCursor();
  }
  const rows = (await pageQuery(req)) as unknown as Row[];
  // An empty page after a cursor: the end of the list, or a cursor outside it. Only then is the
  // anchor looked up on its own (the last page of a walk; every other page is one statement).
  if (rows.length === 0 && req.startingAfter !== undefined && !(await inScope(req, anchorOf(req)!))) {
    throw invalidCursor();
  }
  const has_more = rows.length > req.limit;
  const page = has_more ? rows.slice(0, req.limit) : rows;
  const map = req.map ?? ((r: Row) => r as unknown as T);
  return { data: page.map((r) => map(r) as T), has_more };
}

/** The `id` value the cursor stands for: undefined without a cursor, null when it cannot be one. */
function anchorOf<Row>(req: PageRequest<Row>): string | null | undefined {
  if (req.startingAfter === undefined) return undefined;
  return req.cursorOf ? req.cursorOf(req.startingAfter) : req.startingAfter;
}

async function inScope<Row>(req: PageRequest<Row>, id: string): Promise<boolean> {
  const { sql } = req;
  const rows = await sql`select 1 from ${sql(req.table)} where id = ${id} and ${scopeOf(sql, req.ranges)}`;
  return rows.length > 0;
}

function invalidCursor(): ApiError {
  return new ApiError(
    "invalid_cursor",
    "starting_after: no item of this list has this id (unknown, deleted, or of another organization, mode, filter or resource type).",
    { param: "starting_after" },
  );
}
