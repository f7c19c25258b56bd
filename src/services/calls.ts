import { z } from "@hono/zod-openapi";
import type { Fragment } from "postgres";
import { assertAgentAllowed, type SecretKeyAuth } from "../auth/secretKey.ts";
import { findAgent } from "../db/agents.ts";
import {
  CALL_COLUMNS,
  type CallRow,
  type CallView,
  callView,
  columnList,
  completeCalls,
  contactExists,
  findCall,
  findTranscript,
  insertCall,
  insertCallsFrom,
  insertTask,
  readOngoingCalls,
  ringCalls,
  startCalls,
  taskView,
  transcriptView,
} from "../db/calls.ts";
import { campaignAdvanceTimers } from "../db/campaigns.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import type { InsertedTimerRow } from "../db/timers.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId, newId } from "../ids.ts";
import { listEnvelope, paginate } from "../lists/cursor.ts";
import { E164, FlatObjectSchema } from "../schemas.ts";
import { drawDurationSeconds, pickLanguage, simulateOutcome } from "../simulation/content.ts";
import type { BatchContext, BatchTimerHandler, FiredTimer } from "../timers/runner.ts";
import { schedulerOf } from "../timers/scheduler.ts";
import { recordEvents } from "./events.ts";

/** Calls: creation (simulated with a test key, scheduled or refused with a live key), reads, lists. */

type CallDeps = Pick<Deps, "sql" | "clock" | "env" | "log" | "timers">;

/** Timer kind of the steps of a simulated call. */
export const SIMULATION_TIMER = "call.simulation";

/** SPEC.md/CONTRACT.md schedule of a simulated call, in seconds before SIMULATION_TIME_SCALE. */
export const SIMULATED_SCHEDULE = { ringingAfter: 2, ongoingAfter: 5 } as const;

/** `variables` of a call: a flat object (src/schemas.ts). */
export const FlatVariables = FlatObjectSchema.openapi({
  description: "Flat object of simple values (string ≤ 1,000 characters, number, boolean, null); ≤ 50 keys.",
  example: { firstName: "Claire", language: "fr" },
});

export const CreateCallInput = z
  .object({
    agentId: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    to: z
      .string()
      .regex(E164, { message: "to must be a phone number in E.164 format, such as +33612345678" })
      .openapi({ example: "+33612345678" }),
    contactId: z.string().nullable().optional().openapi({ example: "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    variables: FlatVariables.optional(),
    runAt: z.iso
      .datetime({
        offset: true,
        message: "runAt must be an ISO 8601 timestamp, such as 2026-11-21T09:30:00.000Z",
      })
      .optional()
      .openapi({
        description:
          "Live keys: a future time creates a scheduled call and a task. Test keys: ignored (the call is simulated now).",
        example: "2026-11-22T09:30:00.000Z",
      }),
  })
  .strict()
  .openapi("CreateCallRequest");
export type CreateCallInput = z.infer<typeof CreateCallInput>;

/** The furthest a call can be scheduled. */
const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 3600 * 1000;

/**
 * POST /v1/calls. Everything is checked before anything is written.
 * Test key: a simulated call (SPEC.md "Simulated call"); `runAt`, do-not-call list, call window,
 * country and limits do not apply, nothing reaches a carrier and nothing counts in usage.
 * Live key: paid plan (403) before carrier (503); a future `runAt` creates a scheduled call and its task.
 */
export async function createCall(
  deps: CallDeps,
  auth: SecretKeyAuth,
  input: CreateCallInput,
): Promise<CallView> {
  const agent = isId(input.agentId, "agt")
    ? await findAgent(deps.sql, auth.organizationId, input.agentId)
    : null;
  if (!agent) throw new ApiError("not_found", "No such agent.", { param: "agentId" });
  assertAgentAllowed(auth, agent.id);
  const contactId = input.contactId ?? null;
  if (contactId !== null) {
    if (!isId(contactId, "ct") || !(await contactExists(deps.sql, auth.organizationId, contactId))) {
      throw new ApiError("not_found", "No such contact.", { param: "contactId" });
    }
  }
  const variables = input.variables ?? {};

  if (!auth.livemode) {
    if (!agent.active)
      throw new ApiError("agent_unavailable", "This agent is not active.", { param: "agentId" });
    return pipelinedTransaction(deps.sql, (tx) =>
      createSimulatedCall(tx, deps, {
        organizationId: auth.organizationId,
        agentId: agent.id,
        agentLanguage: agent.language,
        direction: "outbound",
        to: input.to,
        contactId,
        variables,
      }),
    );
  }

  if (!auth.paidPlan) {
    throw new ApiError("plan_required", "Live calls need an active paid plan for the organization.");
  }
  if (!agent.active)
    throw new ApiError("agent_unavailable", "This agent is not active.", { param: "agentId" });
  const runAt = input.runAt ? new Date(input.runAt) : null;
  const now = deps.clock.now().getTime();
  if (runAt && runAt.getTime() > now) {
    if (runAt.getTime() - now > MAX_SCHEDULE_AHEAD_MS) {
      throw new ApiError("invalid_request", "runAt must be within a year.", { param: "runAt" });
    }
    return pipelinedTransaction(deps.sql, (tx) =>
      createScheduledCall(tx, deps, {
        organizationId: auth.organizationId,
        agentId: agent.id,
        to: input.to,
        contactId,
        variables,
        runAt,
      }),
    );
  }
  throw new ApiError("carrier_unavailable", "No carrier is configured to place live phone calls.");
}

/**
 * Creates a simulated call (`livemode` false) and the timer of its first step, inside the caller's
 * transaction: outbound calls of test keys here, web calls of test session tokens and the calls of
 * test campaigns elsewhere. The call then plays by itself: ringing, ongoing, completed.
 */
export async function createSimulatedCall(
  tx: Db,
  deps: CallDeps,
  input: SimulatedCallInput & {
    /** The agent's language, when the caller already read the agent; read otherwise. */
    agentLanguage?: string;
  },
): Promise<CallView> {
  let agentLanguage = input.agentLanguage;
  if (agentLanguage === undefined) {
    const [agent] = await tx<{ language: string }[]>`select language from agents where id = ${input.agentId}`;
    agentLanguage = agent?.language ?? "en";
  }
  return insertSimulatedCall(tx, deps, { ...input, agentLanguage });
}

interface SimulatedCallInput {
  organizationId: string;
  agentId: string;
  direction: "outbound" | "web";
  to: string | null;
  contactId?: string | null;
  campaignId?: string | null;
  variables?: Record<string, unknown>;
  /** An id chosen by the caller beforehand (a web call records it on its session token first). */
  id?: string;
}

/**
 * `createSimulatedCall` with the agent's language known: the call and its timer in one statement.
 */
async function insertSimulatedCall(
  tx: Db,
  deps: CallDeps,
  input: SimulatedCallInput & { agentLanguage: string },
): Promise<CallView> {
  const variables = input.variables ?? {};
  const source = tx`
    select ${input.organizationId}::text as organization_id, ${input.agentId}::text as agent_id,
      ${tx.json(variables as never)}::jsonb as variables, ${pickLanguage(variables, input.agentLanguage)}::text as language`;
  const [row] = await tx<(CallRow & { timers: InsertedTimerRow[] })[]>`
    with ${simulatedCallEntries(tx, deps, input, source)}
    select created_call.*, (select json_agg(created_timer) from created_timer) as timers from created_call`;
  schedulerOf(deps).scheduled(row!.timers);
  return callView(row!);
}

/**
 * The `with` entries that create a simulated call and the timer of its first step from `source`, a
 * select of at most one row `(organization_id, agent_id, variables, language)`: `created_call` returns
 * the call's columns, `created_timer` the timer's (for the scheduler's `scheduled`). When `source`
 * selects nothing, nothing is written, so the call can depend on a claim in the same statement.
 */
export function simulatedCallEntries(
  sql: Db,
  deps: CallDeps,
  input: Omit<SimulatedCallInput, "organizationId" | "agentId" | "variables">,
  source: Fragment,
): Fragment {
  const id = input.id ?? newId("call", deps.clock);
  return simulatedCallsFrom(
    sql,
    deps,
    sql`
      select ${id} as id, s.organization_id, s.agent_id, ${input.to} as to_number,
        ${input.contactId ?? null} as contact_id, ${input.campaignId ?? null} as campaign_id,
        ${input.direction} as direction, s.variables, ${drawDurationSeconds(id)} as simulated_duration_seconds,
        s.language, ${deps.clock.now()} as created_at
      from (${source}) s`,
  );
}

/**
 * The `with` entries that create simulated calls, in `initiated`, from `calls`, a select of `(id,
 * organization_id, agent_id, to_number, contact_id, campaign_id, direction, variables,
 * simulated_duration_seconds, language, created_at)`, and the timer of each one's first step:
 * `created_call` returns the calls' columns, `created_timer` the timers' (for the scheduler's
 * `scheduled`), each timer's payload naming its call.
 */
export function simulatedCallsFrom(sql: Db, deps: CallDeps, calls: Fragment): Fragment {
  const timer = sql`
    select ${SIMULATION_TIMER}::text as kind,
      now() + ${SIMULATED_SCHEDULE.ringingAfter * 1000 * deps.env.SIMULATION_TIME_SCALE}::float8 * interval '1 millisecond' as due_at,
      jsonb_build_object('callId', id, 'to', 'ringing') as payload
    from created_call`;
  const rows = sql`
    select c.id, c.organization_id, false as livemode, 'initiated' as status, c.agent_id, c.to_number,
      c.contact_id, c.campaign_id, c.direction, c.variables, c.simulated_duration_seconds, c.language,
      null as task_id, c.created_at
    from (${calls}) c`;
  return sql`
    created_call as (${insertCallsFrom(sql, rows)}),
    created_timer as (${schedulerOf(deps).insertFrom(sql, timer)})`;
}

/** A live call for later: the call in `scheduled`, its task, and the task's timer at `runAt`. */
async function createScheduledCall(
  tx: Db,
  deps: CallDeps,
  input: {
    organizationId: string;
    agentId: string;
    to: string;
    contactId: string | null;
    variables: Record<string, unknown>;
    runAt: Date;
  },
): Promise<CallView> {
  const callId = newId("call", deps.clock);
  const taskId = newId("task", deps.clock);
  const now = deps.clock.now();
  const row = await insertCall(tx, {
    id: callId,
    organization_id: input.organizationId,
    livemode: true,
    status: "scheduled",
    agent_id: input.agentId,
    to_number: input.to,
    contact_id: input.contactId,
    campaign_id: null,
    direction: "outbound",
    variables: input.variables,
    simulated_duration_seconds: null,
    language: "en",
    task_id: taskId,
    created_at: now,
  });
  const timer = await schedulerOf(deps).schedule(tx, {
    kind: TASK_TIMER,
    at: input.runAt,
    payload: { taskId },
  });
  await insertTask(tx, {
    id: taskId,
    organization_id: input.organizationId,
    type: "call",
    call_id: callId,
    agent_id: input.agentId,
    to_number: input.to,
    run_at: input.runAt,
    timer_id: timer.id,
    created_at: now,
  });
  return callView(row);
}

/** Timer kind of scheduled tasks. */
export const TASK_TIMER = "task.run";

// ——— reads ———

type ReadScope = Pick<SecretKeyAuth, "organizationId" | "livemode" | "agentIds">;

/** Malformed, unknown, foreign, other-mode: all the same 404. */
export async function getCall(deps: Pick<Deps, "sql">, auth: ReadScope, id: string): Promise<CallView> {
  const row = isId(id, "call") ? await findCall(deps.sql, auth, id) : null;
  if (!row) throw new ApiError("not_found", "No such call.");
  return callView(row);
}

export async function getTranscript(deps: Pick<Deps, "sql">, auth: ReadScope, id: string) {
  const row = isId(id, "call") ? await findTranscript(deps.sql, auth, id) : null;
  if (!row) throw new ApiError("not_found", "No such call.");
  if (!row.transcript) throw new ApiError("not_found", "This call has no transcript yet.");
  return transcriptView({ id: row.id, livemode: row.livemode, transcript: row.transcript });
}

export const CALL_STATUSES = [
  "scheduled",
  "initiated",
  "ringing",
  "ongoing",
  "completed",
  "failed",
  "no_answer",
  "busy",
  "cancelled",
] as const;

/** The scope of a calls list: organization, mode, agent restriction and filters (the cursor must fit it too). */
export function callsScope(
  sql: Db,
  auth: ReadScope,
  q: { status?: string | undefined; agentId?: string | undefined; campaignId?: string | undefined },
) {
  return sql`organization_id = ${auth.organizationId} and livemode = ${auth.livemode}
    ${auth.agentIds ? sql`and agent_id = any(${auth.agentIds})` : sql``}
    ${q.status ? sql`and status = ${q.status}` : sql``}
    ${q.agentId ? sql`and agent_id = ${q.agentId}` : sql``}
    ${q.campaignId ? sql`and campaign_id = ${q.campaignId}` : sql``}`;
}

export async function listCalls(
  deps: Pick<Deps, "sql">,
  auth: ReadScope,
  q: {
    limit: number;
    starting_after?: string;
    status?: (typeof CALL_STATUSES)[number];
    agentId?: string;
    campaignId?: string;
  },
) {
  const { sql } = deps;
  const where = callsScope(sql, auth, q);
  return paginate<CallRow, CallView>({
    sql,
    table: "calls",
    where,
    prefix: "call",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: columnList(sql, CALL_COLUMNS),
    map: callView,
  });
}

export { listEnvelope, taskView };

// ——— the simulated call plays out ———

/**
 * The steps of simulated calls, a batch at a time: every call due for the same step moves in one
 * statement. Each step moves a call only from the state it expects, so a step that runs again (a
 * takeover after a crash) changes nothing. The next step is scheduled from this step's due time, so
 * lateness does not add up and, at scale 1, endedAt − startedAt = durationSeconds.
 */
export function simulationSteps(deps: CallDeps): BatchTimerHandler {
  const scale = deps.env.SIMULATION_TIME_SCALE;
  const ringToAnswerMs = (SIMULATED_SCHEDULE.ongoingAfter - SIMULATED_SCHEDULE.ringingAfter) * 1000 * scale;

  // One statement: the calls that were `initiated` ring, and their next step is scheduled from this
  // step's due time (the firing sends it with its take: two round trips with the commit).
  const ring = async ({ tx, timers, followUps, scheduled }: BatchContext) => {
    const next = await ringCalls<InsertedTimerRow>(
      tx,
      timers.map((t) => ({ id: String(t.payload.callId), due: t.dueAt })),
      (moved) =>
        followUps(tx`
          select ${SIMULATION_TIMER}::text as kind,
            due + ${ringToAnswerMs}::float8 * interval '1 millisecond' as due_at,
            jsonb_build_object('callId', id, 'to', 'ongoing') as payload
          from ${moved}`),
    );
    scheduled(next);
  };

  const answer = async ({ tx, timers, schedule }: BatchContext) => {
    const moved = await startCalls(
      tx,
      timers.map((t) => ({ id: String(t.payload.callId), at: t.dueAt })),
    );
    await Promise.all([
      recordEvents(
        tx,
        deps.clock,
        moved.map((call) => ({
          organizationId: call.organization_id,
          type: "call.started" as const,
          livemode: call.livemode,
          data: callView(call),
        })),
      ),
      schedule(
        moved.map((call) => ({
          kind: SIMULATION_TIMER,
          at: new Date(call.started_at!.getTime() + (call.simulated_duration_seconds ?? 30) * 1000 * scale),
          payload: { callId: call.id, to: "completed" },
        })),
      ),
    ]);
  };

  const complete = async ({ tx, timers, schedule }: BatchContext) => {
    const due = new Map(timers.map((t) => [String(t.payload.callId), t.dueAt]));
    const calls = await readOngoingCalls(tx, [...due.keys()]);
    const outcomes = new Map(
      calls.map((call) => [
        call.id,
        simulateOutcome({
          seed: call.id,
          language: call.language,
          durationSeconds: call.simulated_duration_seconds ?? 30,
          at: call.created_at,
          variables: call.variables,
        }),
      ]),
    );
    const moved = await completeCalls(
      tx,
      calls.map((call) => {
        const o = outcomes.get(call.id)!;
        return {
          id: call.id,
          endedAt: due.get(call.id)!,
          durationSeconds: call.simulated_duration_seconds ?? 30,
          summary: o.summary,
          collectedData: o.collectedData,
          transcript: o.segments,
        };
      }),
    );
    // One statement; ids are drawn in this order, so the outbox keeps it per call: the call ended,
    // then its transcript and its analysis are ready. Each once.
    await recordEvents(
      tx,
      deps.clock,
      moved.flatMap((call) => {
        const base = { organizationId: call.organization_id, livemode: call.livemode };
        const view = callView(call);
        const segments = outcomes.get(call.id)!.segments;
        return [
          { ...base, type: "call.ended" as const, data: view },
          {
            ...base,
            type: "call.transcript_ready" as const,
            data: transcriptView({ id: call.id, livemode: call.livemode, transcript: segments }),
          },
          { ...base, type: "call.analysis_ready" as const, data: view },
        ];
      }),
    );
    // A campaign call that ended advances its campaign, in this same transaction (src/services/campaigns.ts).
    await schedule(campaignAdvanceTimers(moved));
  };

  const steps: Record<string, (ctx: BatchContext) => Promise<void>> = {
    ringing: ring,
    ongoing: answer,
    completed: complete,
  };
  return async (ctx) => {
    const byStep = new Map<string, FiredTimer[]>();
    for (const t of ctx.timers) {
      const step = String(t.payload.to);
      if (!steps[step]) throw new Error(`unknown simulation step ${JSON.stringify(t.payload.to)}`);
      byStep.set(step, [...(byStep.get(step) ?? []), t]);
    }
    const results = await Promise.allSettled(
      [...byStep].map(([step, timers]) => steps[step]!({ ...ctx, timers })),
    );
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
  };
}
