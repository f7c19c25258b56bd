import type { Fragment, Sql } from "postgres";
import { TIMER_KINDS, type TimerKind } from "../timers/kinds.ts";
import { type Db, pipelinedTransaction, settledAll } from "./engine/connection.ts";
import { gathered } from "./engine/gathered.ts";

/**
 * The SQL of durable timers. Every function takes `sql` first so it runs inside the caller's
 * transaction. Database time (`now()`) decides what is due; the process clock never does.
 *
 * Ownership of a row: `locked_by` (the runner's number), `locked_until` (lease end) and `epoch`
 * (incremented at every claim). A runner acts on a row only while `locked_by` and `epoch` are the
 * ones it claimed, so after a takeover the old holder's work is fenced out.
 */

/**
 * postgres.js types a transaction apart from the pool, though every query function here runs the same
 * on both: this is the one place that says so.
 */

/** Namespace (first key) of the session advisory locks that say a runner is alive. */
export const RUNNER_LOCK_NAMESPACE = 72_410_003;

export interface NewTimer {
  kind: string;
  /** Absolute due time, or… */
  at?: Date;
  /** …a delay from the database's now(). */
  delayMs?: number;
  payload?: Record<string, unknown>;
  /**
   * Leased to the scheduling runner whatever its due time (not only within its horizon): no other
   * live runner takes it before this one dies or stops. For a safety net that must fire only when
   * the work it watches is no longer under way in a live process.
   */
  hold?: boolean;
}

/** How a runner leases the timers it inserts: those due within `horizonMs`, for `leaseMs`. */
export interface TimerLease {
  runner: number;
  horizonMs: number;
  leaseMs: number;
}

/** A timer as a runner holds it after inserting or claiming it. */
export interface HeldTimer {
  id: string;
  kind: string;
  payload: Record<string, unknown>;
  epoch: number;
  attempts: number;
  /** Due time, database clock, epoch milliseconds. */
  dueMs: number;
  /** The database clock when the row was read, to place the due time on the local clock. */
  dbNowMs: number;
}

/**
 * Inserts a timer. With `lease`, a timer due within `lease.horizonMs` is leased at once to that
 * runner (it will keep it in its wheel); a later one stays free for whoever polls when it comes near.
 * The timers the jobs of a shared transaction insert go in one statement (engine/gathered.ts).
 */
export async function insertTimer(
  sql: Db,
  t: NewTimer,
  lease?: TimerLease,
): Promise<HeldTimer & { leased: boolean }> {
  const kind = lease ? `timers:${lease.runner}:${lease.horizonMs}:${lease.leaseMs}` : "timers";
  const [held] = await gathered(sql, kind, [t], async (tx, timers) =>
    timers.length === 1 ? [await insertOneTimer(tx, timers[0]!, lease)] : insertTimers(tx, timers, lease),
  );
  return held!;
}

async function insertOneTimer(
  sql: Db,
  t: NewTimer,
  lease?: TimerLease,
): Promise<HeldTimer & { leased: boolean }> {
  const at = t.at ?? null;
  const delay = t.delayMs ?? 0;
  const runner = lease?.runner ?? null;
  const hold = t.hold === true;
  const [row] = await sql<
    { id: string; epoch: number; due_ms: number; now_ms: number; locked_by: number | null }[]
  >`
    with v as (
      select coalesce(${at}::timestamptz, now() + ${delay}::float8 * interval '1 millisecond') as due_at
    )
    insert into timers (kind, due_at, payload, locked_by, locked_until)
    select ${t.kind}, v.due_at, ${sql.json((t.payload ?? {}) as never)},
      case when v.due_at <= now() + ${lease?.horizonMs ?? 0}::float8 * interval '1 millisecond' or ${hold}
        then ${runner}::integer end,
      case when (v.due_at <= now() + ${lease?.horizonMs ?? 0}::float8 * interval '1 millisecond' or ${hold})
          and ${runner}::integer is not null
        then greatest(v.due_at, now()) + ${lease?.leaseMs ?? 0}::float8 * interval '1 millisecond' end
    from v
    returning id::text as id, epoch, locked_by,
      (extract(epoch from due_at) * 1000)::float8 as due_ms,
      (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms`;
  const r = row!;
  return {
    id: r.id,
    kind: t.kind,
    payload: t.payload ?? {},
    epoch: r.epoch,
    attempts: 0,
    dueMs: r.due_ms,
    dbNowMs: r.now_ms,
    leased: r.locked_by !== null,
  };
}

/** A timer row as an insert returns it (`insertTimersFrom`): times in epoch milliseconds. */
export interface InsertedTimerRow {
  id: string;
  kind: string;
  payload: Record<string, unknown>;
  epoch: number;
  locked_by: number | null;
  due_ms: number;
  now_ms: number;
}

/**
 * The body of a `with` entry (or a statement) inserting timers from `rows`, a select of
 * `kind text, due_at timestamptz, payload jsonb`, each leased to the runner when due within its
 * horizon, as `insertTimer` does. A handler can thus move its rows and schedule their next steps in
 * one statement; its rows (`InsertedTimerRow`) go through `heldTimers`.
 */
export function insertTimersFrom(
  sql: Db,
  rows: Fragment,
  lease?: TimerLease,
  opts: { holds?: boolean } = {},
): Fragment {
  const runner = lease?.runner ?? null;
  const horizon = lease?.horizonMs ?? 0;
  // With `holds`, `rows` also selects `hold boolean` (see NewTimer.hold).
  const near = opts.holds
    ? sql`(r.due_at <= now() + ${horizon}::float8 * interval '1 millisecond' or r.hold)`
    : sql`r.due_at <= now() + ${horizon}::float8 * interval '1 millisecond'`;
  return sql`
    insert into timers (kind, due_at, payload, locked_by, locked_until)
    select r.kind, r.due_at, r.payload,
      case when ${near} then ${runner}::integer end,
      case when ${near} and ${runner}::integer is not null
        then greatest(r.due_at, now()) + ${lease?.leaseMs ?? 0}::float8 * interval '1 millisecond' end
    from (${rows}) r
    returning id::text as id, kind, payload, epoch, locked_by,
      (extract(epoch from due_at) * 1000)::float8 as due_ms,
      (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms`;
}

export function heldTimers(rows: readonly InsertedTimerRow[]): (HeldTimer & { leased: boolean })[] {
  return rows.map((r) => ({
    id: r.id,
    kind: r.kind,
    payload: r.payload,
    epoch: r.epoch,
    attempts: 0,
    dueMs: r.due_ms,
    dbNowMs: r.now_ms,
    leased: r.locked_by !== null,
  }));
}

/**
 * Inserts several timers in one statement (the follow-ups of a batch of handlers), leased to the
 * runner like `insertTimer` does for each.
 */
export async function insertTimers(
  sql: Db,
  timers: readonly NewTimer[],
  lease?: TimerLease,
): Promise<(HeldTimer & { leased: boolean })[]> {
  if (timers.length === 0) return [];
  const kinds = timers.map((t) => t.kind);
  const ats = timers.map((t) => (t.at ? t.at.toISOString() : null));
  const delays = timers.map((t) => t.delayMs ?? 0);
  const payloads = timers.map((t) => JSON.stringify(t.payload ?? {}));
  // As text: the driver sends a boolean array as one boolean.
  const holds = timers.map((t) => (t.hold === true ? "t" : "f"));
  const rows = await sql<InsertedTimerRow[]>`${insertTimersFrom(
    sql,
    sql`
      select k.kind, coalesce(k.at, now() + k.delay * interval '1 millisecond') as due_at, k.payload::jsonb as payload,
        k.hold::boolean as hold
      from unnest(${kinds}::text[], ${ats as string[]}::timestamptz[], ${delays}::float8[], ${payloads}::text[],
        ${holds}::text[]) as k(kind, at, delay, payload, hold)`,
    lease,
    { holds: true },
  )}`;
  // In the order given: the sequence numbers them as the statement inserts them, in that order.
  return heldTimers([...rows].sort((a, b) => compareIds(a.id, b.id)));
}

/** Two timer ids (bigint, as text) in numeric order. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/**
 * Deletes a pending timer (e.g. a cancelled task). Waits if a runner is firing it right now. The
 * timers the jobs of a shared transaction delete go in one statement (engine/gathered.ts).
 */
export async function deleteTimer(sql: Db, id: string): Promise<boolean> {
  const [deleted] = await gathered(sql, "timer deletes", [id], async (tx, ids) => {
    if (ids.length === 1) {
      const rows =
        await tx`delete from timers where id = ${ids[0]!}::bigint and status = 'pending' returning id`;
      return [rows.length > 0];
    }
    const rows = await tx<{ id: string }[]>`
      delete from timers where id = any(${ids}::bigint[]) and status = 'pending' returning id::text as id`;
    const gone = new Set(rows.map((r) => r.id));
    return ids.map((i) => gone.has(i));
  });
  return deleted!;
}

/** What a claim takes: the runner claiming, how far ahead, for how long, how many. */
export interface TimerClaim {
  runner: number;
  horizonMs: number;
  leaseMs: number;
  limit: number;
}

/**
 * The planner settings of a claim, for the transaction it runs in. The claim must read the due rows
 * in the order of the `timers_due` index and stop at its limit: when the planner believes the table
 * small (never analyzed, or analyzed before a burst of inserts), it would rather fetch every due row
 * and sort them, and on a backlog each claim would then read the whole backlog. Without sorts, the
 * index's order is the cheapest way. The claimed rows are then updated by primary key: the plan kept
 * for the prepared statement cannot know the limit (a parameter) and joined them to the whole table by
 * hashing it.
 */
export function claimPlanning(tx: Db): Promise<unknown> {
  return tx`
    select set_config('enable_sort', 'off', true), set_config('enable_hashjoin', 'off', true),
      set_config('enable_mergejoin', 'off', true)`.execute();
}

/** The statement of `claimDue`, run after `claimPlanning` (also explained by the plan tests). */
export function claimDueSql(sql: Db, opts: TimerClaim): Fragment {
  return sql`
    with live as (
      select objid::int8 as runner from pg_locks
      where locktype = 'advisory' and classid = ${RUNNER_LOCK_NAMESPACE}::oid and objsubid = 2 and granted
    ), due as (
      select id from timers
      where status = 'pending'
        and due_at <= now() + ${opts.horizonMs}::float8 * interval '1 millisecond'
        and (locked_by is null or locked_until < now() or locked_by::int8 not in (select runner from live))
      order by due_at
      limit ${opts.limit}
      for update skip locked
    ), claimed as (
      update timers t set
        locked_by = ${opts.runner},
        locked_until = greatest(t.due_at, now()) + ${opts.leaseMs}::float8 * interval '1 millisecond',
        epoch = t.epoch + 1
      from due where t.id = due.id
      returning t.id::text as id, t.kind, t.payload, t.epoch, t.attempts,
        (extract(epoch from t.due_at) * 1000)::float8 as due_ms
    )
    select c.*, (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms
    from (select 1) one left join claimed c on true
    order by c.due_ms`;
}

/**
 * Claims up to `limit` timers due within `horizonMs` that nobody live holds: free rows, rows whose
 * lease ended, and rows of a runner whose session advisory lock is gone (its process died). One
 * statement, `for update skip locked`, so concurrent runners never claim the same row, in a
 * transaction of its own for its planner settings (`claimPlanning`).
 */
export async function claimDue(
  sql: Sql,
  opts: TimerClaim,
): Promise<{ timers: HeldTimer[]; dbNowMs: number; answeredAt: number }> {
  type Row = {
    id: string | null;
    kind: string;
    payload: Record<string, unknown>;
    epoch: number;
    attempts: number;
    due_ms: number;
    now_ms: number;
  };
  // `begin`, the settings and the claim go out together; `answeredAt` is when the claim's rows came
  // back (before the commit), so the runner can place the database's clock reading in its own time.
  const { rows, answeredAt } = await pipelinedTransaction(sql, async (tx) => {
    const [, claimed] = await settledAll([
      claimPlanning(tx),
      tx<Row[]>`${claimDueSql(tx, opts)}`.then((rows) => ({ rows, answeredAt: performance.now() })),
    ]);
    return claimed;
  });
  const dbNowMs = rows[0]?.now_ms ?? Date.now();
  const timers: HeldTimer[] = [];
  for (const r of rows) {
    if (r.id === null) continue;
    timers.push({
      id: r.id,
      kind: r.kind,
      payload: r.payload,
      epoch: r.epoch,
      attempts: r.attempts,
      dueMs: r.due_ms,
      dbNowMs,
    });
  }
  return { timers, dbNowMs, answeredAt };
}

/**
 * Inside the firing transaction, first: deletes the rows this runner still owns at the epoch it
 * holds them at, and returns their ids. A held timer may fire only if its id is returned: rows taken
 * over (newer epoch), completed, cancelled or not yet committed are not. The delete is the row lock
 * and the completion at once (one write per row instead of a lock and then a delete); the handlers'
 * work commits with it, and a failure rolls it back, leaving the row for a retry.
 */
export async function takeOwned(
  sql: Db,
  runner: number,
  timers: readonly { id: string; epoch: number }[],
): Promise<Set<string>> {
  // `id = any(…)` keeps the primary-key index (a join on unnest may be planned as a scan of the table).
  const rows = await sql<{ id: string }[]>`
    delete from timers
    where id = any(${timers.map((t) => t.id)}::bigint[])
      and id::text || ':' || epoch = any(${timers.map((t) => `${t.id}:${t.epoch}`)}::text[])
      and locked_by = ${runner} and status = 'pending'
    returning id::text as id`;
  return new Set(rows.map((r) => r.id));
}

/**
 * A failed attempt: the error is recorded, the lease released and the timer due again after
 * `backoffMs`; past `maxAttempts` it is kept as `failed` (with its last error) instead of retried.
 * Fenced like everything else: nothing happens if the row changed hands meanwhile.
 */
export async function failTimer(
  sql: Db,
  t: { id: string; epoch: number },
  opts: { runner: number; error: string; backoffMs: number; maxAttempts: number },
): Promise<{ attempts: number; status: "pending" | "failed" } | null> {
  const [row] = await sql<{ attempts: number; status: "pending" | "failed" }[]>`
    update timers set
      attempts = attempts + 1,
      last_error = ${opts.error.slice(0, 2000)},
      status = case when attempts + 1 >= ${opts.maxAttempts} then 'failed' else 'pending' end,
      failed_at = case when attempts + 1 >= ${opts.maxAttempts} then now() end,
      due_at = now() + ${opts.backoffMs}::float8 * interval '1 millisecond',
      locked_by = null,
      locked_until = null
    where id = ${t.id}::bigint and epoch = ${t.epoch} and locked_by = ${opts.runner} and status = 'pending'
    returning attempts, status`;
  return row ?? null;
}

/** Extends the leases of rows this runner still holds (only those about to lapse are passed). */
export async function renewLeases(
  sql: Db,
  runner: number,
  timers: readonly { id: string; epoch: number }[],
  leaseMs: number,
): Promise<void> {
  if (timers.length === 0) return;
  await sql`
    update timers t set locked_until = now() + ${leaseMs}::float8 * interval '1 millisecond'
    from unnest(${timers.map((t) => t.id)}::bigint[], ${timers.map((t) => t.epoch)}::integer[]) as h(id, epoch)
    where t.id = h.id and t.epoch = h.epoch and t.locked_by = ${runner}`;
}

/**
 * On a clean stop: hands the rows this runner held but did not fire back to everyone. A row another
 * transaction holds at that moment (a shared transaction deleting a cancelled timer) is skipped, not
 * waited for: the wait could deadlock with that transaction, which may go on to a row this statement
 * locked first (it had: PostgreSQL rolled the release back). A row skipped keeps this runner's lease,
 * which other runners take over once its liveness lock is gone, as after a crash.
 */
export async function releaseLeases(sql: Db, runner: number): Promise<number> {
  const rows = await sql`
    update timers set locked_by = null, locked_until = null
    where id in (
      select id from timers where locked_by = ${runner} and status = 'pending' for update skip locked)
    returning id`;
  return rows.length;
}

/** Takes the session advisory lock that tells other runners this one is alive. */
export async function tryLockRunner(sql: Db, runner: number): Promise<boolean> {
  const [row] = await sql<
    { ok: boolean }[]
  >`select pg_try_advisory_lock(${RUNNER_LOCK_NAMESPACE}, ${runner}) as ok`;
  return row?.ok === true;
}

export async function unlockRunner(sql: Db, runner: number): Promise<void> {
  await sql`select pg_advisory_unlock(${RUNNER_LOCK_NAMESPACE}, ${runner})`;
}

/**
 * Whether the session `sql` runs on holds the liveness lock of `runner`: false once that session was
 * lost and the driver reconnected (the lock goes with its session).
 */
export async function runnerLockHeld(sql: Db, runner: number): Promise<boolean> {
  const [row] = await sql<{ held: boolean }[]>`
    select exists (
      select 1 from pg_locks
      where locktype = 'advisory' and pid = pg_backend_pid() and granted
        and classid = ${RUNNER_LOCK_NAMESPACE}::int4::oid and objid = ${runner}::int4::oid and objsubid = 2
    ) as held`;
  return row?.held === true;
}

/**
 * A timer kind written into the statement's text rather than sent as a parameter: a partial index on
 * `kind` (timers_webhook_waiting) serves only a statement whose text names its kind.
 */
export function kindLiteral(sql: Db, kind: TimerKind): Fragment {
  return sql.unsafe(`'${kind}'`);
}

/** The kinds of which at most one timer is pending (the unique index of sql/0018 names the same). */
export type SingleTimerKind = typeof TIMER_KINDS.housekeeping | typeof TIMER_KINDS.statistics;

/**
 * Makes sure one pending timer of `kind` exists, due in `delayMs` when it is created here: concurrent
 * callers (several processes starting) create one row.
 */
export async function ensureSingleTimer(sql: Db, kind: SingleTimerKind, delayMs: number): Promise<void> {
  // The conflict target's predicate must be the index's own, word for word, for PostgreSQL to use it.
  await sql`
    insert into timers (kind, due_at, payload)
    values (${kind}, now() + ${delayMs}::float8 * interval '1 millisecond', '{}')
    on conflict (kind) where status = 'pending' and kind in ('housekeeping', 'statistics') do nothing`;
}

/**
 * Makes the pending timer of `kind` due now, unless a runner holds it (then it is due within that
 * runner's horizon anyway). Returns whether it moved.
 */
export async function bringSingleTimerForward(sql: Db, kind: SingleTimerKind): Promise<boolean> {
  const rows = await sql`
    update timers set due_at = now()
    where kind = ${kind} and status = 'pending' and due_at > now()
      and (locked_by is null or locked_until < now())
    returning id`;
  return rows.length > 0;
}

/** Makes pending timers due now and free for any runner (work handed back at shutdown). */
export async function makeTimersDue(sql: Db, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await sql`
    update timers set due_at = now(), locked_by = null, locked_until = null
    where id = any(${ids as string[]}::bigint[]) and status = 'pending'`;
}

/**
 * Makes due now the `limit` earliest pending webhook timers of deliveries waiting for room in
 * `organizationId`'s queue (payload `waitingFor`, index timers_webhook_waiting), free for any runner.
 * Rows another transaction holds are skipped. Returns the ids of the deliveries brought forward.
 */
export async function bringWaitingDeliveriesForward(
  sql: Db,
  organizationId: string,
  limit: number,
): Promise<number[]> {
  const rows = await sql<{ delivery_id: string }[]>`
    update timers set due_at = now(), locked_by = null, locked_until = null
    where id in (
      select id from timers
      where kind = ${kindLiteral(sql, TIMER_KINDS.webhookDelivery)} and status = 'pending' and payload ? 'waitingFor'
        and payload ->> 'waitingFor' = ${organizationId} and due_at > now()
      order by due_at limit ${limit} for update skip locked)
    returning payload ->> 'deliveryId' as delivery_id`;
  return rows.map((r) => Number(r.delivery_id));
}
