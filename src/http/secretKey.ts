import type { MiddlewareHandler } from "hono";
import type { SecretKeyAuth } from "../auth/access.ts";
import { keyKind, sha256, timingSafeEqual } from "../auth/keys.ts";
import { hasScope, type Scope } from "../auth/scopes.ts";
import { toHex } from "../bytes.ts";
import { findSecretKeyByHash } from "../db/secretKeys.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import type { AppEnv } from "./appEnv.ts";
import { readJsonBody } from "./body.ts";

/** Reads `Authorization: Bearer <key>` and resolves a live or test secret key, or null. */
export async function resolveSecretKey(
  deps: Pick<Deps, "sql" | "keyCache">,
  header: string | undefined,
): Promise<SecretKeyAuth | null> {
  // The scheme name is case-insensitive (RFC 9110), like the admin token's.
  const match = header ? /^Bearer +([^\s]+)$/i.exec(header.trim()) : null;
  const presented = match?.[1];
  if (!presented) return null;
  const kind = keyKind(presented);
  if (kind !== "live" && kind !== "test") return null;
  const hash = sha256(presented);
  const cache = deps.keyCache;
  const hashHex = toHex(hash);
  const cached = cache.get(hashHex);
  if (cached) return cached.mode === kind ? cached : null;
  const generation = cache.generation;
  const row = await findSecretKeyByHash(deps.sql, hash);
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
 * `refuseKey` (a live-only route's refusal of test keys) judges the key before its scope: every test
 * key of those routes is answered 403 `test_mode_not_supported`, whatever its scopes.
 * The body is read only once the key is accepted (http/body.ts).
 */
export function requireSecretKey(
  deps: Pick<Deps, "sql" | "keyCache" | "keyUsage">,
  scope: Scope,
  refuseKey?: (auth: SecretKeyAuth) => void,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const auth = await resolveSecretKey(deps, c.req.header("authorization"));
    if (!auth)
      throw new ApiError("invalid_key", "Provide a valid secret key as `Authorization: Bearer <key>`.");
    // A key presented validly was used, whatever the operation then allows it.
    deps.keyUsage.touch(auth.keyId);
    refuseKey?.(auth);
    if (!hasScope(auth.scopes, scope))
      throw new ApiError("missing_scope", `This key lacks the scope \`${scope}\`.`);
    c.set("auth", auth);
    await readJsonBody(c);
    await next();
  };
}

/**
 * The one way a route declares its secret key: the OpenAPI security requirement names the scope
 * that the middleware enforces, so the document and the check cannot drift apart.
 */
export function secretKeyAuth(
  deps: Pick<Deps, "sql" | "keyCache" | "keyUsage">,
  scope: Scope,
  ...then: MiddlewareHandler<AppEnv>[]
) {
  return keyAuth(requireSecretKey(deps, scope), scope, then);
}

/** `secretKeyAuth` for a live-only route: `refuseTestKey` judges the key before its scope. */
export function liveKeyAuth(
  deps: Pick<Deps, "sql" | "keyCache" | "keyUsage">,
  scope: Scope,
  refuseTestKey: (auth: SecretKeyAuth) => void,
  ...then: MiddlewareHandler<AppEnv>[]
) {
  return keyAuth(requireSecretKey(deps, scope, refuseTestKey), scope, then);
}

/** The route's security requirement, naming the scope its key middleware enforces, and its middleware. */
function keyAuth(require: MiddlewareHandler<AppEnv>, scope: Scope, then: MiddlewareHandler<AppEnv>[]) {
  return {
    security: [{ secretKey: [scope] }],
    middleware: [require, ...then] as MiddlewareHandler<AppEnv>[],
  };
}

/**
 * After the key: 403 `agent_not_allowed` for a key restricted to some agents, on operations that concern
 * every agent of the organization (webhook endpoints receive the events of all of them).
 */
export const unrestrictedKey: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (c.get("auth").agentIds) {
    throw new ApiError(
      "agent_not_allowed",
      "This key is restricted to some agents; this operation concerns every agent of the organization and " +
        "needs a key without that restriction.",
    );
  }
  await next();
};

/** Said in the description of every operation that takes `unrestrictedKey`. */
export const UNRESTRICTED_NOTE =
  "Needs a key that is not restricted to some agents (403 `agent_not_allowed` otherwise): endpoints receive " +
  "the events of every agent.";
