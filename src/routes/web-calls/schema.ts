import { z } from "@hono/zod-openapi";

export const StartWebCallBody = z
  .object({
    publishableKey: z.string().optional().openapi({
      description: "Publishable key (`inf_pub_…`). Sent with `captchaToken`; not with `sessionToken`.",
      example: "inf_pub_9fJ2kLmN0pQrStUvWxYz0123456789AbCdEfGhIjK",
    }),
    captchaToken: z.string().optional().openapi({
      description:
        "Bot check token (action `web_call`) obtained on the page. Required with `publishableKey`.",
      example: "03AFcWeA5…",
    }),
    sessionToken: z.string().optional().openapi({
      description: "Single-use session token (`inf_wcs_…`) minted server-side. Alone in the body.",
      example: "inf_wcs_9fJ2kLmN0pQrStUvWxYz0123456789AbCdEfGhIjK",
    }),
  })
  .strict()
  .openapi("WebCallStartRequest", {
    description:
      "Either `{publishableKey, captchaToken}` (from a website in the key's list) or `{sessionToken}`.",
    // The two forms, for validators. `captchaToken` stays optional in the first: one left out is answered
    // 400 `invalid_captcha`, as the bot check's own refusal; the second is the token alone.
    oneOf: [
      { required: ["publishableKey"] },
      {
        required: ["sessionToken"],
        // Each named where it is required, as linters ask of a subschema.
        not: {
          anyOf: [
            { properties: { publishableKey: { type: "string" } }, required: ["publishableKey"] },
            { properties: { captchaToken: { type: "string" } }, required: ["captchaToken"] },
          ],
        },
      },
    ],
  });

const LiveWebCallSchema = z
  .object({
    callId: z.string().openapi({ example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    livemode: z.literal(true),
    maxSeconds: z
      .number()
      .int()
      .openapi({
        description:
          "The server closes the call after this many seconds: 600, or less when the key's monthly cap or the " +
          "organization's plan minutes leave less.",
        example: 600,
      }),
    room: z
      .object({
        name: z.string().openapi({ example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
        serverUrl: z.string().openapi({ example: "wss://media.example.com" }),
        participantToken: z.string().openapi({
          description:
            "LiveKit access token for this room only (join, publish, subscribe), valid at most 10 minutes.",
        }),
      })
      .openapi({ description: "The room to join with any LiveKit-compatible real-time client." }),
  })
  .openapi("LiveWebCall");

const SimulatedWebCallSchema = z
  .object({
    simulated: z.literal(true),
    livemode: z.literal(false),
    callId: z.string().openapi({ example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    maxSeconds: z.number().int().openapi({ example: 600 }),
  })
  .openapi("SimulatedWebCall", {
    description:
      "A test session token: nothing is connected; the call plays as a simulated call, readable with a test key.",
  });

/** The answer: one of two shapes, told apart by `livemode` (a live room, or a simulated call). */
export const WebCallStartSchema = z.union([LiveWebCallSchema, SimulatedWebCallSchema]).openapi(
  "WebCallStart",
  {
    description:
      "`livemode` true: a live call, with the `room` to join. `livemode` false: a simulated call (test session " +
      "token), `simulated` true and no room.",
  },
  { unionPreferredType: "oneOf" },
);
