import { createRoute } from "@hono/zod-openapi";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { AgentPatch, updateAgent } from "../../services/tenancy.ts";
import { ADMIN_NOTE, adminSecurity, requireAdminToken } from "./auth.ts";
import { AgentDetailsSchema, idParams, jsonRequest } from "./schemas.ts";

export function registerAdminUpdateAgent(app: App, deps: Deps) {
  const route = createRoute({
    method: "patch",
    path: "/api/admin/v1/agents/{id}",
    tags: ["Admin"],
    summary: "Update an agent",
    description:
      "Changes any of `name`, `active`, `livekitAgentName` (`null` clears it), `language`; fields left out keep " +
      `their value. An inactive agent takes no new web call (503 \`agent_unavailable\`). ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [requireAdminToken(deps)] as const,
    request: { params: idParams("agt", "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"), ...jsonRequest(AgentPatch) },
    responses: {
      200: {
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
    const agent = await updateAgent(deps, c.req.valid("param").id, c.req.valid("json"));
    return c.json(agent, 200);
  });
}
