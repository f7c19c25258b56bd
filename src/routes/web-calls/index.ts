import type { App, Deps } from "../../deps.ts";
import { createLiveKit } from "../../livekit/client.ts";
import { registerLiveKitWebhook } from "../livekit-webhook.ts";
import { registerStartWebCall } from "./create.ts";

/** Web calls and LiveKit's webhooks, sharing one media-server client (null when not configured). */
export const webCallRoutes: ((app: App, deps: Deps) => void)[] = [
  (app, deps) => {
    const liveKit = createLiveKit(deps.env);
    registerStartWebCall(app, deps, liveKit);
    registerLiveKitWebhook(app, deps, liveKit);
  },
];
