import { z } from "@hono/zod-openapi";
import { FlatObjectSchema, PhoneSchema, Timestamp, UpdatedAt } from "../../schemas.ts";
import { CALL_STATUSES, MAX_SCHEDULE_AHEAD_DAYS } from "../../services/calls.ts";

/** `variables` of a call: a flat object. */
export const FlatVariables = FlatObjectSchema.openapi({
  description: "Flat object of simple values (string ≤ 1,000 characters, number, boolean, null); ≤ 50 keys.",
  example: { firstName: "Claire", language: "fr" },
});

export const CreateCallInput = z
  .object({
    agentId: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    to: PhoneSchema.openapi({
      description:
        "The number to call, E.164, with a country calling code that exists. Kept in its one spelling: a national " +
        "prefix written after the country code is dropped (+330612345678 is +33612345678), so the do-not-call list " +
        "matches however it is written.",
      example: "+33612345678",
    }),
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
          `Live keys: a future time, at most ${MAX_SCHEDULE_AHEAD_DAYS} days ahead, creates a scheduled call and a task ` +
          "(further ahead: 400 `invalid_request` before any other check); a time that has already come places the call " +
          "now, like no `runAt`. Test keys: ignored (the call is simulated now).",
        example: "2026-11-22T09:30:00.000Z",
      }),
  })
  .strict()
  .openapi("CreateCallRequest");

const timestamp = (description: string) =>
  Timestamp.nullable().openapi({ description, example: "2026-11-21T09:30:05.000Z" });

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
    createdAt: Timestamp,
    updatedAt: UpdatedAt,
    startedAt: timestamp("Set when the call becomes `ongoing`."),
    endedAt: timestamp("Set when the call ends."),
    durationSeconds: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "Simulated calls: 30 to 89.", example: 47 }),
    summary: z.string().nullable().openapi({
      description: "Live calls: as reported by the voice agent (`POST /v1/calls/{id}/results`).",
    }),
    collectedData: z
      .record(z.string(), z.unknown())
      .nullable()
      .openapi({
        description:
          "Simulated calls: `appointment_date` and `reason`. Live calls: as reported by the voice agent.",
        example: { appointment_date: "2026-11-27", reason: "a check-up and cleaning" },
      }),
    successful: z.boolean().nullable(),
    outcome: z
      .string()
      .nullable()
      .openapi({
        description:
          'Simulated calls: `answered_human`. Live calls: as reported by the voice agent; a live call that `failed`: the SIP code (`"503"`), ' +
          "LiveKit's error code, `interrupted` (the service stopped while it rang), `end_not_reported` (a web " +
          "call whose end LiveKit never reported), `internal_error` (a call the service could not dial), or the code " +
          "of the calling rule that refused a task's or a campaign's call (`number_blocked`, `outside_call_window`, …).",
        example: "answered_human",
      }),
    recordingUrl: z
      .string()
      .nullable()
      .openapi({
        description:
          "The recording's https URL, once the voice agent reported one (`GET /v1/calls/{id}/recording`). " +
          "Simulated calls have no recording.",
      }),
    taskId: z
      .string()
      .optional()
      .openapi({ description: "Only on a live call placed by a scheduled task (future `runAt`)." }),
  })
  .openapi("Call");

const TranscriptSegmentSchema = z
  .object({
    speaker: z.enum(["agent", "contact"]),
    text: z.string().openapi({ example: "Bonjour, cabinet dentaire Rivoli, que puis-je pour vous ?" }),
    offsetSeconds: z.number().openapi({ description: "Seconds from the start of the call.", example: 0.4 }),
  })
  .openapi("TranscriptSegment");

export const TranscriptSchema = z
  .object({
    callId: z.string().openapi({ example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    livemode: z.boolean(),
    segments: z.array(TranscriptSegmentSchema),
    updatedAt: UpdatedAt.openapi({
      description:
        "The call's `updatedAt`: a transcript is ready once, so `call.transcript_ready` carries the call's " +
        "last change at that moment (after its `call.ended`).",
    }),
  })
  .openapi("Transcript");

export const RESULTS_LIMITS = {
  segments: 2_000,
  segmentText: 10_000,
  summary: 10_000,
  outcome: 64,
  recordingUrl: 2_048,
} as const;

const ReportedSegment = z
  .object({
    speaker: z.enum(["agent", "contact"], { message: "must be agent or contact" }),
    text: z.string().max(RESULTS_LIMITS.segmentText, {
      message: `must be at most ${RESULTS_LIMITS.segmentText.toLocaleString("en")} characters`,
    }),
    offsetSeconds: z.number().min(0, { message: "must be 0 or more" }),
  })
  .strict();

/** An https URL (where the recording can be fetched), at most 2,048 characters. */
const RecordingUrl = z
  .string()
  .max(RESULTS_LIMITS.recordingUrl, { message: `must be at most ${RESULTS_LIMITS.recordingUrl} characters` })
  .refine(
    (value) => {
      try {
        const url = new URL(value);
        return url.protocol === "https:" && url.hostname !== "" && !url.username && !url.password;
      } catch {
        return false;
      }
    },
    { message: "must be an https URL, such as https://recordings.example.com/call.ogg" },
  );

export const CallResultsInputSchema = z
  .object({
    transcript: z
      .array(ReportedSegment)
      .max(RESULTS_LIMITS.segments, {
        message: `must have at most ${RESULTS_LIMITS.segments.toLocaleString("en")} segments`,
      })
      .superRefine((segments, ctx) => {
        for (let i = 1; i < segments.length; i++) {
          if (segments[i]!.offsetSeconds < segments[i - 1]!.offsetSeconds) {
            ctx.addIssue({
              code: "custom",
              message: "must not be less than the offset of the segment before (segments are in order)",
              path: [i, "offsetSeconds"],
            });
            return;
          }
        }
      })
      .nullable()
      .optional()
      .openapi({
        description:
          `What was said, in order: at most ${RESULTS_LIMITS.segments.toLocaleString("en")} segments of at most ` +
          `${RESULTS_LIMITS.segmentText.toLocaleString("en")} characters, \`offsetSeconds\` ≥ 0 and never ` +
          "decreasing. An empty list means nothing was said (no `call.transcript_ready`).",
        example: [
          {
            speaker: "agent",
            text: "Bonjour, cabinet dentaire Rivoli, que puis-je pour vous ?",
            offsetSeconds: 0.4,
          },
          { speaker: "contact", text: "Je voudrais un rendez-vous jeudi.", offsetSeconds: 3.1 },
        ],
      }),
    summary: z
      .string()
      .max(RESULTS_LIMITS.summary, {
        message: `must be at most ${RESULTS_LIMITS.summary.toLocaleString("en")} characters`,
      })
      .nullable()
      .optional()
      .openapi({ example: "The caller booked a check-up on Thursday at 10:00." }),
    collectedData: FlatObjectSchema.nullable()
      .optional()
      .openapi({
        description: "What the agent collected: a flat object of simple values (≤ 50 keys).",
        example: { appointment_date: "2026-11-27T10:00", reason: "check-up" },
      }),
    successful: z
      .boolean()
      .nullable()
      .optional()
      .openapi({ description: "Whether the call reached its goal." }),
    outcome: z
      .string()
      .min(1, { message: "must not be empty" })
      .max(RESULTS_LIMITS.outcome, { message: `must be at most ${RESULTS_LIMITS.outcome} characters` })
      .nullable()
      .optional()
      .openapi({ description: "A short code of how the call ended.", example: "appointment_booked" }),
    recordingUrl: RecordingUrl.nullable().optional().openapi({
      description: "An https URL of the call's recording.",
      example: "https://recordings.example.com/call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C.ogg",
    }),
  })
  .strict()
  .openapi("CallResults");

export const RecordingSchema = z
  .object({
    callId: z.string().openapi({ example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    livemode: z.boolean().openapi({ description: "Always true: simulated calls have no recording." }),
    url: z
      .string()
      .openapi({ example: "https://recordings.example.com/call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C.ogg" }),
  })
  .openapi("Recording");

export const CallIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
});
