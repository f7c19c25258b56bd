import type { App, Deps } from "../deps.ts";
import { registerListConvention } from "../lists/cursor.ts";
import { adminRoutes } from "./admin/index.ts";
import { registerListAgents } from "./agents/list.ts";
import { registerCreateCall } from "./calls/create.ts";
import { registerGetCall } from "./calls/get.ts";
import { registerListCalls } from "./calls/list.ts";
import { registerGetTranscript } from "./calls/transcript.ts";
import { campaignRoutes } from "./campaigns/index.ts";
import { contactRoutes } from "./contacts/index.ts";
import { registerDemo } from "./demo.ts";
import { registerListEvents } from "./events/list.ts";
import { registerCreateDocument } from "./knowledge-bases/createDocument.ts";
import { registerDeleteTask } from "./tasks/delete.ts";
import { registerListTasks } from "./tasks/list.ts";
import { registerCreateWebCallSession } from "./web-call-sessions/create.ts";
import { webCallRoutes } from "./web-calls/index.ts";
import { webhookEndpointRoutes } from "./webhook-endpoints/index.ts";
import { registerWidget } from "./widget.ts";

/** Every API route, registered in this order. Add a line per operation. */
export const routes: ((app: App, deps: Deps) => void)[] = [
  registerListConvention,
  registerListAgents,
  registerCreateCall,
  registerListCalls,
  registerGetCall,
  registerGetTranscript,
  ...campaignRoutes,
  registerListTasks,
  registerDeleteTask,
  ...contactRoutes,
  registerCreateDocument,
  registerListEvents,
  ...webhookEndpointRoutes,
  registerCreateWebCallSession,
  ...webCallRoutes,
  ...adminRoutes,
  registerWidget,
  registerDemo,
];
