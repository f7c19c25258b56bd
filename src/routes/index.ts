import type { RouteRegistration } from "../http/appEnv.ts";
import { registerListConvention } from "../lists/cursor.ts";
import { adminRoutes } from "./admin/index.ts";
import { agentRoutes } from "./agents/index.ts";
import { blockedNumberRoutes } from "./blocked-numbers/index.ts";
import { callRoutes } from "./calls/index.ts";
import { campaignRoutes } from "./campaigns/index.ts";
import { contactRoutes } from "./contacts/index.ts";
import { registerDemo } from "./demo/index.ts";
import { eventRoutes } from "./events/index.ts";
import { knowledgeBaseRoutes } from "./knowledge-bases/index.ts";
import { liveKitRoutes } from "./livekit/index.ts";
import { taskRoutes } from "./tasks/index.ts";
import { webCallSessionRoutes } from "./web-call-sessions/index.ts";
import { webCallRoutes } from "./web-calls/index.ts";
import { webhookEndpointRoutes } from "./webhook-endpoints/index.ts";
import { registerWidget } from "./widget/index.ts";

/** Every route, one resource folder at a time, in this order. A new resource adds its folder's list here. */
export const routes: RouteRegistration[] = [
  registerListConvention,
  ...agentRoutes,
  ...callRoutes,
  ...campaignRoutes,
  ...taskRoutes,
  ...blockedNumberRoutes,
  ...contactRoutes,
  ...knowledgeBaseRoutes,
  ...eventRoutes,
  ...webhookEndpointRoutes,
  ...webCallSessionRoutes,
  ...webCallRoutes,
  ...liveKitRoutes,
  ...adminRoutes,
  registerWidget,
  registerDemo,
];
