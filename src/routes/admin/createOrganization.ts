import { createRoute } from "@hono/zod-openapi";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { createOrganization, OrganizationInput } from "../../services/tenancy.ts";
import { ADMIN_NOTE, adminSecurity, requireAdminToken } from "./auth.ts";
import { jsonRequest, OrganizationSchema } from "./schemas.ts";

export function registerAdminCreateOrganization(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/admin/v1/organizations",
    tags: ["Admin"],
    summary: "Create an organization",
    description: `Creates an organization, optionally with a paid plan and a monthly allowance of live minutes. ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [requireAdminToken(deps)] as const,
    request: jsonRequest(OrganizationInput),
    responses: {
      201: {
        description: "The organization.",
        content: { "application/json": { schema: OrganizationSchema } },
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
    const organization = await createOrganization(deps, c.req.valid("json"));
    return c.json(organization, 201);
  });
}
