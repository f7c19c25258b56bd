import { createRoute } from "@hono/zod-openapi";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { createSecretKey, SecretKeyInput } from "../../services/tenancy.ts";
import { ADMIN_NOTE, adminSecurity, requireAdminToken } from "./auth.ts";
import { CreatedSecretKeySchema, idParams, jsonRequest } from "./schemas.ts";

export function registerAdminCreateSecretKey(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/admin/v1/organizations/{id}/secret-keys",
    tags: ["Admin"],
    summary: "Create a secret key",
    description:
      "Creates a live (`inf_live_…`) or test (`inf_test_…`) secret key with the given scopes, optionally " +
      "restricted to some agents of the organization (404 `not_found` with `param` for another organization's " +
      `agent). The key is in this answer only; it is stored as a SHA-256 hash. ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [requireAdminToken(deps)] as const,
    request: { params: idParams("org", "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"), ...jsonRequest(SecretKeyInput) },
    responses: {
      201: {
        description: "The key, with its secret value shown this once.",
        content: { "application/json": { schema: CreatedSecretKeySchema } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const key = await createSecretKey(deps, c.req.valid("param").id, c.req.valid("json"));
    return c.json(key, 201);
  });
}
