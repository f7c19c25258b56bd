import { z } from "@hono/zod-openapi";
import { E164, FlatObjectSchema } from "../../schemas.ts";
import { CALL_STATUSES } from "../../services/calls.ts";

/** `variables` of a call: a flat object. */
export const FlatVariables = FlatObjectSchema.openapi({
  description: "Flat object of simple values (string ≤ 1,000 characters, number, boolean, null); ≤ 50 keys.",
  example: { firstName: "Claire", language: "fr" },
});

export const CreateCallInput = z
  .object({
    agentId: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    to: z
      .string()
      .regex(E164, { message: "to must be a phone number in E.164 format, such as +33612345678" })
      .openapi({ example: "+33612345678" }),
    contactId: z.string().nullable().optional().openapi({ example: "ct_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    variables: FlatVariables.optional(),
    runAt: z.iso
      .datetime({
        offset: true,
        message: "runAt must be an ISO 8601 timestamp, such as 2026-11-21T09:30:00.000Z",
      })
      .optional()
      .openapi({
        description:
          "Live keys: a future time creates a scheduled call and a task. Test keys: ignored (the call is simulated now).",
        example: "2026-11-22T09:30:00.000Z",
      }),
  })
  .strict()
  .openapi("CreateCallRequest");

const timestamp = (description: string) =>
  z.string().nullable().openapi({ description, example: "2026-11-21T09:30:05.000Z" });

export const CallSchema = z
  .object({
    id: z.string().openapi({ example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    livemode: z.boolean().openapi({ description: "false for simulated calls (test keys)." }),
    status: z.enum(CALL_STATUSES).openapi({
      description:
        "Simulated calls: `initiated` → `ringing` → `ongoing` → `completed`. Live phone calls: `scheduled` (a " +
        "future `runAt`), `initiated` (accepted, minutes reserved), `ringing` (being dialled), `ongoing` " +
        "(answered), then `completed`; or `busy` (SIP 486/600/603), `no_answer` (408/480/487 or 30 s of " +
        "ringing), `failed` (see `outcome`), `cancelled` (its task deleted). Live web calls: `initiated`, " +
        "`ongoing`, then `completed`, `no_answer` or `failed`.",
    }),
    agentId: z.string(),
    to: z
      .string()
      .nullable()
      .openapi({ description: "E.164 number; null for web calls.", example: "+33612345678" }),
    contactId: z.string().nullable(),
    campaignId: z.string().nullable(),
    direction: z.enum(["outbound", "web"]),
    createdAt: z.string().openapi({ example: "2026-11-21T09:30:00.000Z" }),
    startedAt: timestamp("Set when the call becomes `ongoing`."),
    endedAt: timestamp("Set when the call ends."),
    durationSeconds: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "Simulated calls: 30 to 89.", example: 47 }),
    summary: z.string().nullable(),
    collectedData: z
      .record(z.string(), z.unknown())
      .nullable()
      .openapi({
        description: "Simulated calls: `appointment_date` and `reason`.",
        example: { appointment_date: "2026-11-27", reason: "a check-up and cleaning" },
      }),
    successful: z.boolean().nullable(),
    outcome: z
      .string()
      .nullable()
      .openapi({
        description:
          'Simulated calls: `answered_human`. A live call that `failed`: the SIP code (`"503"`), LiveKit\'s ' +
          "error code, `interrupted` (the service stopped while it rang), `end_not_reported` (a web call whose " +
          "end LiveKit never reported), or the code of the calling rule that refused a task's or a campaign's " +
          "call (`number_blocked`, `outside_call_window`, …).",
        example: "answered_human",
      }),
    recordingUrl: z.string().nullable().openapi({ description: "Simulated calls have no recording." }),
    taskId: z
      .string()
      .optional()
      .openapi({ description: "Only on a live call placed by a scheduled task (future `runAt`)." }),
  })
  .openapi("Call");

export const TranscriptSchema = z
  .object({
    callId: z.string(),
    livemode: z.boolean(),
    segments: z.array(
      z.object({
        speaker: z.enum(["agent", "contact"]),
        text: z.string(),
        offsetSeconds: z.number().openapi({ description: "Seconds from the start of the call." }),
      }),
    ),
  })
  .openapi("Transcript");

export const CallIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
});
