import { z } from "@hono/zod-openapi";

export const LiveKitWebhookEventSchema = z.record(z.string(), z.unknown()).openapi("LiveKitWebhookEvent", {
  description:
    "A LiveKit webhook event (protobuf JSON). `participant_joined` moves a web call to `ongoing`; " +
    "`participant_left` of `sip_<call id>` ends a phone call; `room_finished` ends either. Other events " +
    "are acknowledged and ignored.",
  example: { event: "room_finished", id: "EV_abc", room: { name: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" } },
});
