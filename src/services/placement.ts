import type { Sql } from "postgres";
import type { VersionedRows } from "../caches.ts";
import type { AgentRow } from "../db/agents.ts";
import type { CallRow } from "../db/calls.ts";
import { type Db, pipelinedTransaction, type TransactionEnd } from "../db/engine/connection.ts";
import type { OrganizationRow } from "../db/organizations.ts";
import {
  type PhoneCallDecision,
  placePhoneCalls,
  rowFromJson,
  type VersionedJson,
} from "../db/phonePlacements.ts";
import type { InsertedTimerRow } from "../db/timers.ts";
import type { Deps } from "../deps.ts";
import { type ApiError, notFound } from "../errors.ts";
import { canonicalNumber } from "../phoneNumbers.ts";
import { TIMER_KINDS } from "../timers/kinds.ts";
import { type PhoneCall, phoneCallRefusal, type RowsRefusal, rowsRefusal } from "./admission.ts";
import { monthOf } from "./minutes.ts";

/**
 * Placing live phone calls: every check of a live phone call in its order (services/admission.ts),
 * under the organization's locks for what needs them (its limits, its plan minutes), then the call
 * `initiated` with its minutes reserved and the timer that dials it (dialing.ts), one round trip for
 * a whole batch (db/phonePlacements.ts). The rest of a call's life is the live-call lifecycle's
 * (liveCalls.ts).
 *
 * The checks that read only the organization and the agent run here, on rows this process keeps
 * (`deps.placementRows`), before the statement; the statement places no call one of them refused, and
 * tells whether those rows are still the organization's and the agent's (their versions): when one
 * changed, or was never read, the call was neither placed nor refused, and is looked at again with the
 * rows the statement sent back. So a kept row never decides anything on its own, and a placement
 * needs no read of them of its own.
 */

/** The longest phone call, whatever remains of the plan. */
export const MAX_PHONE_CALL_SECONDS = 3600;

/** A live phone call to place now: a new one, or the `scheduled` call of a task whose time has come. */
export interface PhoneCallToPlace {
  callId: string;
  organizationId: string;
  agentId: string;
  /** E.164, as the call keeps it. */
  to: string;
  contactId: string | null;
  /** The contact was checked when the call was asked for (a task's, a campaign's): not again. */
  contactChecked?: boolean;
  campaignId: string | null;
  variables: Record<string, unknown>;
  /** The call exists, `scheduled` (a task's): it moves to `initiated` instead of being created. */
  scheduled?: boolean;
  /** A refusal that comes right after the agent's existence (the key's agent restriction). */
  barred?: ApiError;
}

/** The call placed, or why not (with the organization as the refusal found it, when it was read). */
export type Placement = { call: CallRow } | { refused: ApiError; organization?: OrganizationRow };

/** How many looks a call gets when its organization or agent keeps changing under it. */
const MAX_LOOKS = 10;

/**
 * Places `calls` now: one transaction per look at them (one round trip each, the commit sent behind
 * the statement), a second only for calls whose rows this process did not know or that changed. The
 * dial timers are armed once their rows are committed. `arrived`: calls that came while the first
 * transaction waited for its connection, taken into it once the connection is held (their
 * placements follow those of `calls`, which it extends).
 */
export async function placeNow(
  deps: Deps,
  sql: Sql,
  calls: PhoneCallToPlace[],
  arrived: () => PhoneCallToPlace[] = () => [],
): Promise<Placement[]> {
  let first = true;
  return lookUntilDecided(calls, async (batch) => {
    const looked = await pipelinedTransaction(sql, (tx, end) => {
      if (first) batch.push(...arrived());
      first = false;
      return look(tx, deps, batch, end);
    });
    // Armed once committed: due at once, a dial timer armed before would fire into a transaction that
    // cannot see its row yet, and look again later.
    deps.timers.scheduled(looked.timers);
    return looked.placements;
  });
}

/**
 * Places `calls` inside the caller's transaction (a task's firing, a campaign's advance), which keeps
 * the organization's locks until it ends; the dial timers are handed to the runner at once (like
 * `TimerScheduler.schedule`, it looks again if one comes due before the commit).
 */
export async function placeInTransaction(
  tx: Db,
  deps: Deps,
  calls: PhoneCallToPlace[],
): Promise<Placement[]> {
  return lookUntilDecided(calls, async (batch) => {
    const looked = await look(tx, deps, batch);
    deps.timers.scheduled(looked.timers);
    return looked.placements;
  });
}

/**
 * Looks at the calls not decided yet until none is left. A look may add calls at the end of its batch
 * (`placeNow`'s `arrived`): they join `calls`.
 */
async function lookUntilDecided(
  calls: PhoneCallToPlace[],
  lookAt: (batch: PhoneCallToPlace[]) => Promise<(Placement | "stale")[]>,
): Promise<Placement[]> {
  const answers: Placement[] = [];
  let pending = calls.map((_, i) => i);
  for (let looks = 0; pending.length > 0; looks++) {
    if (looks === MAX_LOOKS) throw new Error(`live phone calls still undecided after ${MAX_LOOKS} looks`);
    const batch = pending.map((i) => calls[i]!);
    const outcomes = await lookAt(batch);
    const indices = [...pending];
    for (const extra of batch.slice(pending.length)) {
      indices.push(calls.length);
      calls.push(extra);
    }
    pending = [];
    for (const [j, outcome] of outcomes.entries()) {
      if (outcome === "stale") pending.push(indices[j]!);
      else answers[indices[j]!] = outcome;
    }
  }
  return answers;
}

/** One look at `calls`: the checks on the kept rows, then the placement's statement. */
async function look(
  tx: Db,
  deps: Deps,
  calls: readonly PhoneCallToPlace[],
  end?: TransactionEnd,
): Promise<{ placements: (Placement | "stale")[]; timers: InsertedTimerRow[] }> {
  const now = deps.clock.now();
  const kept = deps.placementRows;
  const checked = calls.map((c) => {
    const organization = kept.organizations.get(c.organizationId);
    const agent = kept.agents.get(c.agentId);
    const call: PhoneCall | null =
      organization && agent && agent.row.organization_id === c.organizationId
        ? { organization: organization.row, agent: agent.row, to: c.to, at: now, scheduled: false }
        : null;
    const fromRows: RowsRefusal | null = call ? rowsRefusal(deps, call) : null;
    return {
      call,
      fromRows,
      organizationVersion: organization?.version ?? null,
      agentVersion: call ? agent!.version : null,
    };
  });
  const { decisions, timers } = await placePhoneCalls<InsertedTimerRow>(
    tx,
    {
      candidates: calls.map((c, i) => {
        const { call, fromRows, organizationVersion, agentVersion } = checked[i]!;
        return {
          callId: c.callId,
          organizationId: c.organizationId,
          organizationVersion,
          agentId: c.agentId,
          agentVersion,
          to: c.to,
          // In its one spelling: a number stored before numbers were (a task's, a campaign contact's)
          // still meets its do-not-call entry.
          canonicalTo: canonicalNumber(c.to),
          contactId: c.contactId,
          checkContact: c.contactChecked !== true,
          campaignId: c.campaignId,
          variables: c.variables,
          scheduled: c.scheduled === true,
          // Not placed: barred, refused by a check of the rows, or rows not known yet.
          refused: c.barred !== undefined || fromRows !== null || call === null,
        };
      }),
      now,
      hourAgo: new Date(now.getTime() - 3_600_000),
      month: monthOf(now),
      longestSeconds: MAX_PHONE_CALL_SECONDS,
      timer: { kind: TIMER_KINDS.callDial, insert: (sql, rows) => deps.timers.insertFrom(sql, rows) },
    },
    end?.last,
  );
  const placements = decisions.map((d, i) => {
    const { call, fromRows } = checked[i]!;
    return decide(deps, calls[i]!, d, call, fromRows);
  });
  return { placements, timers };
}

/** What one decision means for its call; a stale one leaves the rows it brought for the next look. */
function decide(
  deps: Deps,
  c: PhoneCallToPlace,
  d: PhoneCallDecision,
  call: PhoneCall | null,
  fromRows: RowsRefusal | null,
): Placement | "stale" {
  if (d.agentMissing) return { refused: notFound("agent", "agentId") };
  if (d.stale) {
    keep(deps.placementRows.organizations, c.organizationId, d.organization, organizationOf);
    keep(deps.placementRows.agents, c.agentId, d.agent, agentOf);
    return "stale";
  }
  if (c.barred) return { refused: c.barred };
  if (d.notScheduled) throw new Error(`call ${c.callId} is no longer scheduled`);
  const refusal = phoneCallRefusal(
    deps,
    call!,
    {
      contactMissing: d.contactMissing,
      planRemaining: d.planRemaining,
      blocked: d.blocked,
      load: { inProgress: d.inProgress, inHour: d.inHour, oldest: d.oldest },
    },
    fromRows,
  );
  if (refusal) {
    if (d.call) throw new Error(`call ${c.callId} was placed although refused (${refusal.code})`);
    return { refused: refusal, organization: call!.organization };
  }
  if (!d.call) throw new Error(`call ${c.callId} was neither placed nor refused`);
  return { call: d.call };
}

function keep<T>(
  rows: VersionedRows<T>,
  id: string,
  found: VersionedJson | null,
  parse: (json: Record<string, unknown>) => T,
): void {
  if (found) rows.set(id, { row: parse(found.row), version: found.version });
  else rows.delete(id);
}

const organizationOf = (json: Record<string, unknown>) => rowFromJson<OrganizationRow>(json, ["created_at"]);
const agentOf = (json: Record<string, unknown>) => rowFromJson<AgentRow>(json, ["created_at"]);
