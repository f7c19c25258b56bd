import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerLiveKitWebhook } from "./webhook.ts";

/** What the media server (LiveKit) calls: its webhooks about the rooms of live calls. */
export const liveKitRoutes: RouteRegistration[] = [registerLiveKitWebhook];
