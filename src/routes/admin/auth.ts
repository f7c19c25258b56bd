import type { MiddlewareHandler } from "hono";
import { sha256, timingSafeEqual } from "../../auth/keys.ts";
import type { Deps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { App, AppEnv } from "../../http/appEnv.ts";
import { readJsonBody } from "../../http/body.ts";

/**
 * The gate of every admin route. Without ADMIN_TOKEN the admin API does not exist: the answer is
 * the same 404 as for an unknown route. With it, `Authorization: Bearer <ADMIN_TOKEN>` is required;
 * the SHA-256 hashes of both tokens are compared in constant time so timing reveals nothing. Made once
 * per app (routes/admin/index.ts), which hashes the token once. The body is read only once the token
 * is accepted (http/body.ts).
 */
export function requireAdminToken(deps: Pick<Deps, "env">): MiddlewareHandler<AppEnv> {
  const token = deps.env.ADMIN_TOKEN;
  const expected = token ? sha256(token) : null;
  const guard: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (!expected) throw new ApiError("not_found", `No route ${c.req.method} ${c.req.path}.`);
    const match = /^Bearer +(\S+)$/i.exec(c.req.header("authorization")?.trim() ?? "");
    const presented = match?.[1];
    if (!presented || !timingSafeEqual(sha256(presented), expected)) {
      throw new ApiError("invalid_key", "Provide the admin token as `Authorization: Bearer <ADMIN_TOKEN>`.");
    }
    await readJsonBody(c);
    await next();
  };
  return guard;
}

/** The OpenAPI security requirement of the admin routes. */
export const adminSecurity = [{ adminToken: [] }];

/** Said once in every admin operation's description. */
export const ADMIN_NOTE =
  "Operators only: enabled when `ADMIN_TOKEN` is set (otherwise 404 `not_found`), authenticated with " +
  "`Authorization: Bearer <ADMIN_TOKEN>`.";

/** Registers the `adminToken` security scheme in the OpenAPI document. */
export function registerAdminSecurityScheme(app: App) {
  app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
    type: "http",
    scheme: "bearer",
    description:
      "The operator token set in `ADMIN_TOKEN`. Without that variable the admin API is disabled and its " +
      "routes answer 404 `not_found`.",
  });
}
