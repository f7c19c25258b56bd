import type { App, Deps } from "../deps.ts";
import { adminRoutes } from "./admin/index.ts";
import { registerListAgents } from "./agents/list.ts";

/** Every API route, registered in this order. Add a line per operation. */
export const routes: ((app: App, deps: Deps) => void)[] = [registerListAgents, ...adminRoutes];
