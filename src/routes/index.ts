import type { App, Deps } from "../deps.ts";
import { registerListAgents } from "./agents/list.ts";
import { registerWidget } from "./widget.ts";

/** Every API route, registered in this order. Add a line per operation. */
export const routes: ((app: App, deps: Deps) => void)[] = [registerListAgents, registerWidget];
