import { createRoute } from "@hono/zod-openapi";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { OrganizationPatch, updateOrganization } from "../../services/tenancy.ts";
import { ADMIN_NOTE, adminSecurity, requireAdminToken } from "./auth.ts";
import { idParams, jsonRequest, OrganizationSchema } from "./schemas.ts";

export function registerAdminUpdateOrganization(app: App, deps: Deps) {
  const route = createRoute({
    method: "patch",
    path: "/api/admin/v1/organizations/{id}",
    tags: ["Admin"],
    summary: "Update an organization",
    description:
      "Changes any of `name`, `paidPlan`, `planMinutes`; fields left out keep their value. Changing " +
      `\`planMinutes\` changes the monthly allowance, not the minutes already used. ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [requireAdminToken(deps)] as const,
    request: { params: idParams("org", "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"), ...jsonRequest(OrganizationPatch) },
    responses: {
      200: {
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
    const organization = await updateOrganization(deps, c.req.valid("param").id, c.req.valid("json"));
    return c.json(organization, 200);
  });
}
