import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerListEvents } from "./list.ts";
import { registerRedeliverEvent } from "./redeliver.ts";
import { registerWebhookDocs } from "./webhooks.ts";

export const eventRoutes: RouteRegistration[] = [
  registerListEvents,
  registerRedeliverEvent,
  registerWebhookDocs,
];
