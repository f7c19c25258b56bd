import type { MiddlewareHandler } from "hono";
import type { Sql } from "postgres";
import type { AppEnv } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { readJsonBody } from "../http/body.ts";
import { keyCacheFor } from "./keyCache.ts";
import { keyKind, sha256, timingSafeEqual, toHex } from "./keys.ts";
import { hasScope, type Scope } from "./scopes.ts";

/** What a valid secret key resolves to. */
export interface SecretKeyAuth {
  keyId: string;
  organizationId: string;
  mode: "live" | "test";
  livemode: boolean;
  scopes: string[];
  /** null: every agent of the organization. */
  agentIds: string[] | null;
  paidPlan: boolean;
}

interface KeyRow {
  id: string;
  organization_id: string;
  mode: "live" | "test";
  key_hash: Uint8Array;
  scopes: string[];
  agent_ids: string[] | null;
  revoked_at: Date | null;
  paid_plan: boolean;
}

/** Reads `Authorization: Bearer <key>` and resolves a live or test secret key, or null. */
export async function resolveSecretKey(sql: Sql, header: string | undefined): Promise<SecretKeyAuth | null> {
  const match = header ? /^Bearer ([^\s]+)$/.exec(header.trim()) : null;
  const presented = match?.[1];
  if (!presented) return null;
  const kind = keyKind(presented);
  if (kind !== "live" && kind !== "test") return null;
  const hash = sha256(presented);
  const cache = keyCacheFor(sql);
  const hashHex = toHex(hash);
  const cached = cache.get(hashHex);
  if (cached) return cached.mode === kind ? cached : null;
  const generation = cache.generation;
  const [row] = await sql<KeyRow[]>`
    select k.id, k.organization_id, k.mode, k.key_hash, k.scopes, k.agent_ids, k.revoked_at, o.paid_plan
    from secret_keys k join organizations o on o.id = k.organization_id
    where k.key_hash = ${hash}`;
  if (!row || row.revoked_at || !timingSafeEqual(row.key_hash, hash) || row.mode !== kind) return null;
  const auth: SecretKeyAuth = {
    keyId: row.id,
    organizationId: row.organization_id,
    mode: row.mode,
    livemode: row.mode === "live",
    scopes: row.scopes,
    agentIds: row.agent_ids,
    paidPlan: row.paid_plan,
  };
  cache.set(hashHex, auth, generation);
  return auth;
}

/**
 * Route middleware: a valid secret key with `scope`, else 401 `invalid_key` / 403 `missing_scope`.
 * The body is read only once the key is accepted (http/body.ts).
 */
export function requireSecretKey(sql: Sql, scope: Scope): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const auth = await resolveSecretKey(sql, c.req.header("authorization"));
    if (!auth)
      throw new ApiError("invalid_key", "Provide a valid secret key as `Authorization: Bearer <key>`.");
    if (!hasScope(auth.scopes, scope))
      throw new ApiError("missing_scope", `This key lacks the scope \`${scope}\`.`);
    c.set("auth", auth);
    await readJsonBody(c);
    await next();
  };
}

/** False when the key is restricted to other agents. */
export function agentAllowed(auth: SecretKeyAuth, agentId: string): boolean {
  return !auth.agentIds || auth.agentIds.includes(agentId);
}

/** 403 `agent_not_allowed` when the key is restricted to other agents. */
export function assertAgentAllowed(auth: SecretKeyAuth, agentId: string, param = "agentId"): void {
  if (!agentAllowed(auth, agentId)) {
    throw new ApiError("agent_not_allowed", "This key is restricted to other agents.", { param });
  }
}

/**
 * The one way a route declares its secret key: the OpenAPI security requirement names the scope
 * that the middleware enforces, so the document and the check cannot drift apart.
 */
export function secretKeyAuth(sql: Sql, scope: Scope, ...then: MiddlewareHandler<AppEnv>[]) {
  return {
    security: [{ secretKey: [scope] }],
    middleware: [requireSecretKey(sql, scope), ...then] as MiddlewareHandler<AppEnv>[],
  };
}
