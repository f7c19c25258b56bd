import type { Sql } from "postgres";
import type { SecretKeyAuth } from "./auth/access.ts";
import type { KeyCache } from "./auth/keyCache.ts";
import type { GenerationCache, VersionedRows } from "./caches.ts";
import type { Clock } from "./clock.ts";
import type { AgentRow } from "./db/agents.ts";
import type { CallView } from "./db/calls.ts";
import type { Coalescer } from "./db/engine/coalesce.ts";
import type { Db } from "./db/engine/connection.ts";
import type { SharedTransactions } from "./db/engine/sharedTransactions.ts";
import type { KeyUsageRecorder } from "./db/keyUsage.ts";
import type { OrganizationRow } from "./db/organizations.ts";
import type { ServerSecrets } from "./db/serverSecrets.ts";
import type { SessionTokenInserts } from "./db/sessionTokens.ts";
import type { SimulatedCallInserts } from "./db/simulatedCalls.ts";
import type { TestTokenRedemptions } from "./db/webCallRedemptions.ts";
import type { Env } from "./env.ts";
import type { ApiError } from "./errors.ts";
import type { IdGenerator } from "./ids.ts";
import type { LiveKit } from "./livekit/client.ts";
import type { Logger } from "./log.ts";
import type { FlatObject } from "./schemas.ts";
import type { TimerScheduler } from "./timers/scheduler.ts";

/**
 * Everything the application uses from outside, and all of the process's state: made once by the
 * composition root (compose.ts) and passed down. No module keeps state of its own, so two apps in one
 * process (tests do this) never share a cache, a sequence or a batch.
 */
export interface Deps {
  /** The request pool (or the embedded database's one connection). */
  sql: Sql;
  clock: Clock;
  ids: IdGenerator;
  log: Logger;
  env: Env;
  /** Where services write timers: the process's runner when it runs one, else the table alone. */
  timers: TimerScheduler;
  /** Resolved secret keys, evicted on revocation and organization changes. */
  keyCache: KeyCache;
  /** Each organization's agents (`GET /v1/agents`), evicted when one changes. */
  agentLists: GenerationCache<AgentRow[]>;
  /**
   * The organizations and agents that live phone calls' placements last read, with their versions:
   * the checks that read only them run before the placement's statement, which tells whether they
   * are still current (services/placement.ts).
   */
  placementRows: { organizations: VersionedRows<OrganizationRow>; agents: VersionedRows<AgentRow> };
  /** Records when secret keys were last used, off the requests' path (db/keyUsage.ts). */
  keyUsage: KeyUsageRecorder;
  /** Per-database secrets (idempotent token derivation, the keys of row ids), read once. */
  secrets: ServerSecrets;
  /** The media server, or null when LIVEKIT_URL / _API_KEY / _API_SECRET are not all set. */
  liveKit: LiveKit | null;
  /**
   * Live phone calls whose dial is under way in this process, by call id, until its outcome is
   * written: their safety nets wait for them (services/dialing.ts), and shutdown may wait for them.
   * `netId` is the call's current safety-net timer, dropped with the outcome.
   */
  dialing: Map<string, { done: Promise<void>; netId: string }>;
  /** Statements that concurrent requests share (db/engine/coalesce.ts). */
  batches: {
    sessionTokenInserts: SessionTokenInserts;
    testTokenRedemptions: TestTokenRedemptions;
    simulatedCallInserts: SimulatedCallInserts;
    /**
     * Live phone calls that `POST /v1/calls` places now, one transaction per batch (services/calls.ts,
     * `placeLiveCalls`): the call, or the refusal of that request.
     */
    livePlacements: Coalescer<LivePlacement, CallView | ApiError>;
    /**
     * A live call's changes after its placement that arrive many at a time (the callee's answer, the
     * end LiveKit reports), each in a transaction shared with the others under way, keyed by call.
     */
    liveCallChanges: SharedTransactions;
  };
}

/** A live phone call to place now, as `POST /v1/calls` asked for it (not yet checked). */
export interface LivePlacement {
  auth: SecretKeyAuth;
  agentId: string;
  /** E.164. */
  to: string;
  contactId: string | null;
  variables: FlatObject;
}

/**
 * The same dependencies for work that may run inside a caller's transaction: `sql` is the pool or that
 * transaction. Work that opens a transaction of its own takes `Deps`.
 */
export type TxDeps = Omit<Deps, "sql"> & { sql: Db };
