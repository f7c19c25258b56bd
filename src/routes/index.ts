import type { App, Deps } from "../deps.ts";
import { registerListAgents } from "./agents/list.ts";
import { registerCreateWebCallSession } from "./web-call-sessions/create.ts";

/** Every API route, registered in this order. Add a line per operation. */
export const routes: ((app: App, deps: Deps) => void)[] = [registerListAgents, registerCreateWebCallSession];
