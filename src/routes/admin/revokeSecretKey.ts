import { createRoute } from "@hono/zod-openapi";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { revokeSecretKey } from "../../services/tenancy.ts";
import { ADMIN_NOTE, adminSecurity, requireAdminToken } from "./auth.ts";
import { idParams, RevokedSecretKeySchema } from "./schemas.ts";

export function registerAdminRevokeSecretKey(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/admin/v1/secret-keys/{id}/revoke",
    tags: ["Admin"],
    summary: "Revoke a secret key",
    description:
      "Revokes a secret key: from now on it is refused with 401 `invalid_key`. Revoking again changes " +
      `nothing and answers the same. ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [requireAdminToken(deps)] as const,
    request: { params: idParams("key", "key_01JD8Y3M6W9Q2T4V5X7Z8A9B0C") },
    responses: {
      200: {
        description: "The revoked key (without its secret value).",
        content: { "application/json": { schema: RevokedSecretKeySchema } },
      },
      ...errorResponses("invalid_request", "invalid_key", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    const key = await revokeSecretKey(deps, c.req.valid("param").id);
    return c.json(key, 200);
  });
}
