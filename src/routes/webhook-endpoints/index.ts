import type { App, Deps } from "../../deps.ts";
import { registerCreateWebhookEndpoint } from "./create.ts";
import { registerDeleteWebhookEndpoint } from "./delete.ts";
import { registerListWebhookEndpoints } from "./list.ts";

export const webhookEndpointRoutes: ((app: App, deps: Deps) => void)[] = [
  registerCreateWebhookEndpoint,
  registerListWebhookEndpoints,
  registerDeleteWebhookEndpoint,
];
