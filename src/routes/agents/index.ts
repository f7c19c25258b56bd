import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerGetAgent } from "./get.ts";
import { registerListAgents } from "./list.ts";

export const agentRoutes: RouteRegistration[] = [registerListAgents, registerGetAgent];
