import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCreateWebhookEndpoint } from "./create.ts";
import { registerDeleteWebhookEndpoint } from "./delete.ts";
import { registerListWebhookEndpoints } from "./list.ts";

export const webhookEndpointRoutes: RouteRegistration[] = [
  registerCreateWebhookEndpoint,
  registerListWebhookEndpoints,
  registerDeleteWebhookEndpoint,
];
