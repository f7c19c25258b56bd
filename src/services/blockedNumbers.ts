import type { SecretKeyAuth } from "../auth/access.ts";
import {
  type BlockedNumberRow,
  blockedNumbersPage,
  deleteBlockedNumber as deleteRow,
  upsertBlockedNumber,
} from "../db/blockedNumbers.ts";
import { type Page, paginate } from "../db/engine/pages.ts";
import type { Deps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { isId } from "../ids.ts";

/**
 * The do-not-call list of an organization. Entries have the mode of the key that writes them: live
 * entries apply to live phone calls (services/admission.ts); test entries are consulted by nothing,
 * since test calls apply no calling rule, so integrators can try their list management safely.
 */

type Scope = Pick<SecretKeyAuth, "organizationId" | "livemode">;

export function blockedNumberView(r: BlockedNumberRow) {
  return {
    id: r.id,
    livemode: r.livemode,
    phone: r.phone,
    reason: r.reason,
    createdAt: r.created_at.toISOString(),
  };
}
export type BlockedNumber = ReturnType<typeof blockedNumberView>;

/** Lists a number; a number already listed in this mode answers its existing entry (`created` false). */
export async function blockNumber(
  deps: Deps,
  auth: Scope,
  input: { phone: string; reason?: string | null | undefined },
): Promise<{ entry: BlockedNumber; created: boolean }> {
  const { row, created } = await upsertBlockedNumber(deps.sql, {
    id: deps.ids.next("bn"),
    organization_id: auth.organizationId,
    livemode: auth.livemode,
    phone: input.phone,
    reason: input.reason ?? null,
    created_at: deps.clock.now(),
  });
  return { entry: blockedNumberView(row), created };
}

/** Malformed, unknown, foreign, other-mode: all the same 404. */
export async function unblockNumber(deps: Deps, auth: Scope, id: string) {
  if (!isId(id, "bn") || !(await deleteRow(deps.sql, auth, id))) {
    throw notFound("blocked number");
  }
  return { id, deleted: true as const };
}

export function listBlockedNumbers(
  deps: Pick<Deps, "sql">,
  auth: Scope,
  q: { limit: number; starting_after?: string | undefined; phone?: string | undefined },
): Promise<Page<BlockedNumber>> {
  return paginate<BlockedNumberRow, BlockedNumber>({
    ...blockedNumbersPage(deps.sql, auth, q),
    map: blockedNumberView,
  });
}
