import type { Sql } from "postgres";
import { KeyCache } from "./auth/keyCache.ts";
import { GenerationCache, VersionedRows } from "./caches.ts";
import { type Clock, systemClock } from "./clock.ts";
import { listenForChanges } from "./db/changes.ts";
import { Coalescer, logRefusedBatch, STATEMENT_COALESCING } from "./db/engine/coalesce.ts";
import { REQUEST_POOL_SIZE, refusedByDatabase } from "./db/engine/connection.ts";
import { SharedTransactions } from "./db/engine/sharedTransactions.ts";
import { KeyUsageRecorder } from "./db/keyUsage.ts";
import { ServerSecrets } from "./db/serverSecrets.ts";
import { sessionTokenInserts } from "./db/sessionTokens.ts";
import { simulatedCallInserts } from "./db/simulatedCalls.ts";
import { testTokenRedemptions } from "./db/webCallRedemptions.ts";
import type { Deps } from "./deps.ts";
import type { Env } from "./env.ts";
import { IdGenerator } from "./ids.ts";
import { createLiveKit } from "./livekit/client.ts";
import type { Logger } from "./log.ts";
import { placeLiveCalls } from "./services/calls.ts";
import { WEB_CALL_RATE_LIMIT } from "./services/rateLimit.ts";
import { firstStepTimer } from "./services/simulatedCalls.ts";
import { databaseScheduler, type TimerScheduler } from "./timers/scheduler.ts";

/**
 * How a live call's answers and ends share transactions (db/engine/sharedTransactions.ts): as many
 * under way as the request pool has connections, at most 16 jobs each. Measured at 500 calls/s
 * offered (BENCHMARKS.md, "Live phone calls"): two of 64 made one organization's ends queue on its
 * plan-minutes row, which every end updates and a long transaction holds until it commits, and on
 * the embedded database a transaction of 64 held the one connection long enough to delay every
 * other; four of 16 kept up with both. A transaction waits 10 ms from its oldest job for others: with
 * calls arriving evenly, each job otherwise ran alone, and the round trips of a transaction a job took
 * the machine from the placements (BENCHMARKS.md, "a gathering window").
 */
const LIVE_CALL_CHANGES = { maxBatch: 16, maxInFlight: REQUEST_POOL_SIZE, gatherMs: 10 } as const;

/**
 * The composition root: every piece of process state is made here, once, and handed down in `Deps`
 * (caches, secrets, the id sequence, the media-server client, the statements requests share). main.ts
 * calls it for the server and the CLI; tests call it for each app they build.
 */
export function composeDeps(input: {
  sql: Sql;
  env: Env;
  log: Logger;
  clock?: Clock;
  /** The process's timer runner when it runs one; without it timers are only written to the table. */
  timers?: TimerScheduler;
  /**
   * A connection of the live placements' own (PostgreSQL; main.ts), else they take the pool's. A
   * placement batch holds its organizations' locks until it commits, one batch at a time; on the
   * pool it queued behind the calls' answers and ends, and that wait was most of the 201's time
   * under load (BENCHMARKS.md, "Live phone calls").
   */
  placementSql?: Sql;
}): Deps {
  const { sql, env, log } = input;
  const placementSql = input.placementSql ?? sql;
  const clock = input.clock ?? systemClock;
  const timers = input.timers ?? databaseScheduler;
  // The first step's timer of a simulated call, written through the scheduler the dependencies hold
  // when a statement is built.
  const firstStep = firstStepTimer({
    env,
    timers: { insertFrom: (tx, rows) => deps.timers.insertFrom(tx, rows) },
  });
  const deps: Deps = {
    sql,
    clock,
    ids: new IdGenerator(clock),
    log,
    env,
    timers,
    keyCache: new KeyCache(),
    agentLists: new GenerationCache(),
    placementRows: { organizations: new VersionedRows(), agents: new VersionedRows() },
    keyUsage: new KeyUsageRecorder(sql, clock, log),
    secrets: new ServerSecrets(sql),
    liveKit: createLiveKit(env),
    dialing: new Map(),
    batches: {
      sessionTokenInserts: sessionTokenInserts(sql, log),
      testTokenRedemptions: testTokenRedemptions(sql, log, { rule: WEB_CALL_RATE_LIMIT, timer: firstStep }),
      simulatedCallInserts: simulatedCallInserts(sql, log, firstStep),
      // One batch at a time: a batch holds its organizations' locks until it commits, so a second
      // one would mostly hold a pooled connection while it waits. The requests that arrive while a
      // batch waits for its connection join it (the wait was most of a placement's time).
      livePlacements: new Coalescer(
        async (request) => (await placeLiveCalls(deps, [request], undefined, placementSql))[0]!,
        (requests, more) => placeLiveCalls(deps, requests, more, placementSql),
        {
          maxBatch: STATEMENT_COALESCING.maxBatch,
          maxInFlight: 1,
          joinWhileWaiting: true,
          refusedByDatabase,
          onRefused: logRefusedBatch(log, "live call placements"),
        },
      ),
      liveCallChanges: new SharedTransactions(sql, log, LIVE_CALL_CHANGES),
    },
  };
  return deps;
}

/**
 * Evicts the caches of `deps` on the changes other processes make (PostgreSQL only, see
 * db/changes.ts); changes made in this process evict them at once where they are made.
 */
export function evictOnChanges(sql: Sql, deps: Pick<Deps, "keyCache" | "agentLists">): Promise<void> {
  return listenForChanges(sql, {
    key_changes: (change) => deps.keyCache.evictChange(change),
    agent_changes: (change) => deps.agentLists.evict(change.organizationId),
  });
}
