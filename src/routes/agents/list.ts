import { createRoute, z } from "@hono/zod-openapi";
import { secretKeyAuth } from "../../auth/secretKey.ts";
import { listAgents } from "../../db/agents.ts";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { AgentSchema } from "./schema.ts";

export function registerListAgents(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/agents",
    tags: ["Agents"],
    summary: "List agents",
    description:
      "Lists the agents of the organization (those the key is restricted to, if any). This list keeps its own format " +
      "(`{agents: [...]}`) until it adopts the cursor convention.",
    ...secretKeyAuth(deps.sql, "agents:read"),
    responses: {
      200: {
        description: "The agents, newest first.",
        content: { "application/json": { schema: z.object({ agents: z.array(AgentSchema) }) } },
      },
      ...errorResponses("invalid_key", "missing_scope"),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    const agents = await listAgents(deps.sql, auth.organizationId, auth.agentIds);
    return c.json({ agents }, 200);
  });
}
