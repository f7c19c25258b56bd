import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { ApiError, errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { readBody } from "../../http/body.ts";
import { applyLiveKitEvent } from "../../services/liveCalls.ts";
import { LiveKitWebhookEventSchema } from "./schema.ts";

/**
 * POST /api/livekit/webhook: LiveKit's events about the rooms of live calls.
 * The Authorization header is a JWT signed with LIVEKIT_API_SECRET that carries the body's SHA-256;
 * anything that does not verify is 401 `invalid_signature` and changes nothing. Every transition is
 * fenced by the status it expects, so LiveKit's retries and replays change nothing.
 */

export function registerLiveKitWebhook(app: App, deps: Deps) {
  app.openAPIRegistry.registerComponent("securitySchemes", "liveKitWebhook", {
    type: "apiKey",
    in: "header",
    name: "Authorization",
    description:
      "LiveKit's webhook signature: a JWT issued by LIVEKIT_API_KEY, signed with LIVEKIT_API_SECRET, whose " +
      "`sha256` claim is the SHA-256 of the body. Configure LiveKit to send webhooks to this URL.",
  });
  const route = createRoute({
    method: "post",
    path: "/api/livekit/webhook",
    tags: ["Calls"],
    operationId: "receiveLiveKitWebhook",
    summary: "Receive LiveKit webhooks",
    description:
      "For the media server only. Accepts `application/webhook+json` (what LiveKit sends) and " +
      "`application/json`. A missing or bad signature is 401 `invalid_signature` and changes nothing; " +
      "so is every request while LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET are not all set. A " +
      "correctly signed body that is no event LiveKit's SDK can read is 400 `invalid_request`. " +
      "Times are the event's own `createdAt` (one more than a day away from the server's clock is not " +
      "believed: the arrival's is taken), never before the call was created. Web calls: `participant_joined` → `ongoing` (`call.started`). " +
      "Phone calls start when the callee answers, not by this webhook; `participant_left` of the callee " +
      "(`sip_<call id>`) ends one, and the server then deletes its room. `room_finished` ends either: " +
      "`completed` with its duration (`call.ended`; `endedAt` is never before `startedAt`, nor more than " +
      "`maxSeconds` after it: the server ends a call then); a web call whose " +
      "join was never reported starts and completes at that instant (`call.started`, `call.ended`, 0 s, " +
      "one minute kept); unused reserved minutes are returned. Without these webhooks a call runs " +
      "until its `maxSeconds` and keeps every reserved minute. Replays change nothing. Answers 200 " +
      "`{received: true}`.",
    security: [{ liveKitWebhook: [] }],
    // The signature covers the body's hash: it is read (64 KiB at most) before the signature is checked.
    middleware: [readBody] as const,
    request: {
      body: {
        required: true,
        content: {
          "application/webhook+json": { schema: LiveKitWebhookEventSchema },
          "application/json": { schema: LiveKitWebhookEventSchema },
        },
      },
    },
    responses: {
      200: {
        description: "Received (whether or not it changed anything).",
        content: { "application/json": { schema: z.object({ received: z.literal(true) }) } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_signature",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const raw = await c.req.text();
    const authorization = c.req.header("authorization");
    const event = deps.liveKit ? await deps.liveKit.receiveWebhook(raw, authorization) : null;
    if (!event) {
      if (deps.liveKit?.signs(raw, authorization)) {
        throw new ApiError(
          "invalid_request",
          "The webhook is signed, but its body is no LiveKit event that can be read.",
        );
      }
      throw new ApiError("invalid_signature", "The webhook signature is missing or does not verify.");
    }
    await applyLiveKitEvent(deps, event);
    return c.json({ received: true as const }, 200);
  });
}
