import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { getAgentForKey } from "../../services/agents.ts";
import { AgentIdParams, AgentSchema } from "./schema.ts";

export function registerGetAgent(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/agents/{id}",
    tags: ["Agents"],
    operationId: "getAgent",
    summary: "Retrieve an agent",
    description:
      "One agent of the organization, with what the voice agent needs at the start of a call: its `language`, " +
      "`instructions`, `greeting` and `knowledgeBaseIds`. Agents have no mode: live and test keys read the same " +
      "agent. An agent of another organization is 404 `not_found`; so is, for a key restricted to some agents, " +
      "every other agent of the organization, as their calls are (the agent exists, but not for that key).",
    ...secretKeyAuth(deps, "agents:read"),
    request: { params: AgentIdParams },
    responses: {
      200: { description: "The agent.", content: { "application/json": { schema: AgentSchema } } },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    return c.json(await getAgentForKey(deps, c.get("auth"), c.req.valid("param").id), 200);
  });
}
