import { createRoute } from "@hono/zod-openapi";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { createPublishableKey, PublishableKeyInput } from "../../services/tenancy.ts";
import { ADMIN_NOTE, adminSecurity, requireAdminToken } from "./auth.ts";
import { CreatedPublishableKeySchema, idParams, jsonRequest } from "./schemas.ts";

export function registerAdminCreatePublishableKey(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/admin/v1/organizations/{id}/publishable-keys",
    tags: ["Admin"],
    summary: "Create a publishable key",
    description:
      "Creates a publishable key (`inf_pub_…`) bound to one agent of the organization, usable only from the " +
      "listed HTTPS origins (no wildcard, no path) and within its monthly minute cap. The key is in this " +
      `answer only; it is stored as a SHA-256 hash. ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [requireAdminToken(deps)] as const,
    request: {
      params: idParams("org", "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"),
      ...jsonRequest(PublishableKeyInput),
    },
    responses: {
      201: {
        description: "The key, with its value shown this once.",
        content: { "application/json": { schema: CreatedPublishableKeySchema } },
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
    const key = await createPublishableKey(deps, c.req.valid("param").id, c.req.valid("json"));
    return c.json(key, 201);
  });
}
