import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { listAgentsForKey } from "../../services/agents.ts";
import { AgentSchema } from "./schema.ts";

export function registerListAgents(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/agents",
    tags: ["Agents"],
    operationId: "listAgents",
    summary: "List agents",
    description:
      "Lists the agents of the organization (those the key is restricted to, if any). This list keeps its own format " +
      "(`{agents: [...]}`) until it adopts the cursor convention.",
    ...secretKeyAuth(deps, "agents:read"),
    responses: {
      200: {
        description: "The agents, newest first.",
        content: { "application/json": { schema: z.object({ agents: z.array(AgentSchema) }) } },
      },
      ...errorResponses("invalid_key", "missing_scope"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await listAgentsForKey(deps, c.get("auth")), 200);
  });
}
