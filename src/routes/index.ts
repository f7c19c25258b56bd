import type { App, Deps } from "../deps.ts";
import { registerListAgents } from "./agents/list.ts";
import { registerCreateCall } from "./calls/create.ts";
import { registerGetCall } from "./calls/get.ts";
import { registerListCalls } from "./calls/list.ts";
import { registerGetTranscript } from "./calls/transcript.ts";
import { registerDeleteTask } from "./tasks/delete.ts";
import { registerListTasks } from "./tasks/list.ts";

/** Every API route, registered in this order. Add a line per operation. */
export const routes: ((app: App, deps: Deps) => void)[] = [
  registerListAgents,
  registerCreateCall,
  registerListCalls,
  registerGetCall,
  registerGetTranscript,
  registerListTasks,
  registerDeleteTask,
];
