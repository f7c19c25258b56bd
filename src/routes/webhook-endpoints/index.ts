import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCreateWebhookEndpoint } from "./create.ts";
import { registerDeleteWebhookEndpoint } from "./delete.ts";
import { registerListDeliveries } from "./deliveries.ts";
import { registerGetWebhookEndpoint } from "./get.ts";
import { registerListWebhookEndpoints } from "./list.ts";
import { registerRotateWebhookSecret } from "./rotateSecret.ts";
import { registerUpdateWebhookEndpoint } from "./update.ts";

export const webhookEndpointRoutes: RouteRegistration[] = [
  registerCreateWebhookEndpoint,
  registerListWebhookEndpoints,
  registerGetWebhookEndpoint,
  registerUpdateWebhookEndpoint,
  registerDeleteWebhookEndpoint,
  registerRotateWebhookSecret,
  registerListDeliveries,
];
