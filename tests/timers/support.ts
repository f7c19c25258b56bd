import type { Sql } from "postgres";
import { createLogger } from "../../src/log.ts";
import { type RunnerOptions, TimerRunner } from "../../src/timers/runner.ts";
import type { TestDatabase } from "../helpers/db.ts";

/** A runner tuned for tests (fast polls, short horizon) on a test database, logs captured. */
export function testRunner(db: TestDatabase, opts: Partial<RunnerOptions> = {}, logs: string[] = []) {
  return new TimerRunner({
    sql: db.sql,
    log: createLogger("debug", (line) => logs.push(line)),
    liveness: db.kind === "embedded" ? "shared" : "own",
    pollIntervalMs: 50,
    horizonMs: 300,
    backoff: () => 30,
    ...opts,
  });
}

/** A table where the test handler records each committed firing, to count them. */
export async function createFiresTable(sql: Sql): Promise<void> {
  await sql`create table if not exists test_fires (
    timer_id bigint not null, name text not null, runner integer not null, fired_at timestamptz not null default clock_timestamp()
  )`;
}

/** Registers `test.fire`: one row in test_fires per committed firing. */
export function registerFire(runner: TimerRunner, before?: (name: string) => Promise<void> | void) {
  runner.register("test.fire", async ({ tx, timer }) => {
    const name = String(timer.payload.name);
    await before?.(name);
    await tx`insert into test_fires (timer_id, name, runner) values (${timer.id}::bigint, ${name}, ${runner.runnerId})`;
  });
  return runner;
}

export async function fireCounts(sql: Sql): Promise<Map<string, number>> {
  const rows = await sql<
    { name: string; n: number }[]
  >`select name, count(*)::int as n from test_fires group by name`;
  return new Map(rows.map((r) => [r.name, r.n]));
}
