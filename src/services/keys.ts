import { generateKey } from "../auth/keys.ts";
import { type Page, type PageInput, paginate } from "../db/engine/pages.ts";
import {
  insertPublishableKey,
  type PublishableKeyListRow,
  publishableKeysPage,
  revokePublishableKey as revokePublishableKeyRow,
} from "../db/publishableKeys.ts";
import {
  insertSecretKey,
  revokeSecretKey as revokeSecretKeyRow,
  type SecretKeyListRow,
  secretKeysPage,
} from "../db/secretKeys.ts";
import type { TxDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import { assertAgentsOf } from "./agents.ts";
import { monthOf } from "./minutes.ts";
import { assertOrganization } from "./organizations.ts";

/** Secret and publishable keys: created (the key shown once, only its hash kept) and revoked by operators. */

export async function createSecretKey(
  deps: TxDeps,
  organizationId: string,
  input: { mode: "live" | "test"; scopes: string[]; agentIds?: string[] | null | undefined },
) {
  await assertOrganization(deps, organizationId);
  const agentIds = input.agentIds ? [...new Set(input.agentIds)] : null;
  if (agentIds) await assertAgentsOf(deps, organizationId, agentIds, "agentIds");
  const scopes = [...new Set(input.scopes)];
  const k = await generateKey(input.mode);
  const row = await insertSecretKey(deps.sql, {
    id: deps.ids.next("key"),
    organization_id: organizationId,
    mode: input.mode,
    key_hash: k.hash,
    start: k.start,
    scopes,
    agent_ids: agentIds,
    created_at: deps.clock.now(),
  });
  return {
    id: row.id,
    key: k.key,
    organizationId,
    mode: input.mode,
    scopes,
    agentIds,
    start: k.start,
    createdAt: row.created_at.toISOString(),
  };
}

export async function createPublishableKey(
  deps: TxDeps,
  organizationId: string,
  input: { agentId: string; allowedOrigins: string[]; monthlyMinuteCap: number },
) {
  await assertOrganization(deps, organizationId);
  await assertAgentsOf(deps, organizationId, [input.agentId], "agentId");
  const origins = [...new Set(input.allowedOrigins)];
  const k = await generateKey("publishable");
  const row = await insertPublishableKey(deps.sql, {
    id: deps.ids.next("key"),
    organization_id: organizationId,
    agent_id: input.agentId,
    key_hash: k.hash,
    start: k.start,
    allowed_origins: origins,
    monthly_minute_cap: input.monthlyMinuteCap,
    created_at: deps.clock.now(),
  });
  return {
    id: row.id,
    key: k.key,
    organizationId,
    agentId: input.agentId,
    allowedOrigins: origins,
    monthlyMinuteCap: input.monthlyMinuteCap,
    start: k.start,
    createdAt: row.created_at.toISOString(),
  };
}

/** Revocation is idempotent: revoking twice keeps the first revocation time. The key leaves the cache at once. */
export async function revokeSecretKey(deps: TxDeps, id: string) {
  if (!isId(id, "key")) throw notFound("secret key");
  const row = await revokeSecretKeyRow(deps.sql, id, deps.clock.now());
  if (!row) throw notFound("secret key");
  deps.keyCache.evictChange({ keyId: id });
  return {
    id: row.id,
    organizationId: row.organization_id,
    mode: row.mode,
    scopes: row.scopes,
    agentIds: row.agent_ids,
    start: row.start,
    createdAt: row.created_at.toISOString(),
    revoked: true as const,
    revokedAt: row.revoked_at!.toISOString(),
  };
}

export async function revokePublishableKey(deps: TxDeps, id: string) {
  if (!isId(id, "key")) throw notFound("publishable key");
  const row = await revokePublishableKeyRow(deps.sql, id, deps.clock.now());
  if (!row) throw notFound("publishable key");
  return {
    id: row.id,
    organizationId: row.organization_id,
    agentId: row.agent_id,
    allowedOrigins: row.allowed_origins,
    monthlyMinuteCap: row.monthly_minute_cap,
    start: row.start,
    createdAt: row.created_at.toISOString(),
    revoked: true as const,
    revokedAt: row.revoked_at!.toISOString(),
  };
}

const secretKeySummary = (r: SecretKeyListRow) => ({
  id: r.id,
  organizationId: r.organization_id,
  mode: r.mode,
  scopes: r.scopes,
  agentIds: r.agent_ids,
  start: r.start,
  createdAt: r.created_at.toISOString(),
  revoked: r.revoked_at !== null,
  revokedAt: r.revoked_at?.toISOString() ?? null,
  lastUsedAt: r.last_used_at?.toISOString() ?? null,
});
export type SecretKeySummary = ReturnType<typeof secretKeySummary>;

/** The secret keys of an organization, newest first, revoked ones included; never their value. */
export async function listSecretKeys(
  deps: TxDeps,
  organizationId: string,
  q: PageInput,
): Promise<Page<SecretKeySummary>> {
  await assertOrganization(deps, organizationId);
  return paginate<SecretKeyListRow, SecretKeySummary>({
    ...secretKeysPage(deps.sql, organizationId, q),
    map: secretKeySummary,
  });
}

const publishableKeySummary = (r: PublishableKeyListRow) => ({
  id: r.id,
  organizationId: r.organization_id,
  agentId: r.agent_id,
  allowedOrigins: r.allowed_origins,
  monthlyMinuteCap: r.monthly_minute_cap,
  start: r.start,
  createdAt: r.created_at.toISOString(),
  revoked: r.revoked_at !== null,
  revokedAt: r.revoked_at?.toISOString() ?? null,
  lastUsedAt: r.last_used_at?.toISOString() ?? null,
  minutesUsedThisMonth: r.minutes_used,
});
export type PublishableKeySummary = ReturnType<typeof publishableKeySummary>;

/**
 * The publishable keys of an organization, newest first, revoked ones included; never their value.
 * `lastUsedAt` is the key's latest web call attempt; `minutesUsedThisMonth` counts its cap's minutes
 * (UTC month, running calls' reservations included).
 */
export async function listPublishableKeys(
  deps: TxDeps,
  organizationId: string,
  q: PageInput,
): Promise<Page<PublishableKeySummary>> {
  await assertOrganization(deps, organizationId);
  return paginate<PublishableKeyListRow, PublishableKeySummary>({
    ...publishableKeysPage(deps.sql, organizationId, monthOf(deps.clock.now()), q),
    map: publishableKeySummary,
  });
}
