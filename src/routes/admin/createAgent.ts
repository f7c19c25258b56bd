import { createRoute } from "@hono/zod-openapi";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { AgentInput, createAgent } from "../../services/tenancy.ts";
import { ADMIN_NOTE, adminSecurity, requireAdminToken } from "./auth.ts";
import { AgentDetailsSchema, idParams, jsonRequest } from "./schemas.ts";

export function registerAdminCreateAgent(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/admin/v1/organizations/{id}/agents",
    tags: ["Admin"],
    summary: "Create an agent",
    description:
      "Creates an agent in the organization. `livekitAgentName` is the agent name dispatched on the media " +
      `server (default: the agent id). ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [requireAdminToken(deps)] as const,
    request: { params: idParams("org", "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"), ...jsonRequest(AgentInput) },
    responses: {
      201: {
        description: "The agent.",
        content: { "application/json": { schema: AgentDetailsSchema } },
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
    const agent = await createAgent(deps, c.req.valid("param").id, c.req.valid("json"));
    return c.json(agent, 201);
  });
}
