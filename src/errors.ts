import { z } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Logger } from "./log.ts";

/** Every error code the API can answer, with its HTTP status. One table, used everywhere. */
export const errorStatus = {
  invalid_request: 400,
  invalid_query: 400,
  invalid_cursor: 400,
  invalid_captcha: 400,
  test_campaign_too_large: 400,
  too_many_endpoints: 400,
  invalid_key: 401,
  invalid_session_token: 401,
  invalid_signature: 401,
  origin_not_allowed: 403,
  plan_required: 403,
  plan_minutes_exhausted: 403,
  missing_scope: 403,
  agent_not_allowed: 403,
  test_mode_not_supported: 403,
  number_blocked: 403,
  country_not_allowed: 403,
  outside_call_window: 403,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_key_reused: 409,
  results_already_reported: 409,
  call_not_started: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  minute_cap_reached: 429,
  concurrency_limit_reached: 429,
  hourly_limit_reached: 429,
  internal_error: 500,
  call_start_failed: 502,
  agent_unavailable: 503,
  carrier_unavailable: 503,
} as const satisfies Record<string, ContentfulStatusCode>;

export type ErrorCode = keyof typeof errorStatus;

export const ERROR_CODES = Object.keys(errorStatus) as [ErrorCode, ...ErrorCode[]];

export class ApiError extends HTTPException {
  readonly code: ErrorCode;
  readonly param: string | undefined;
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { param?: string; headers?: Record<string, string> } = {},
  ) {
    super(errorStatus[code], { message });
    this.code = code;
    this.param = opts.param;
    this.headers = opts.headers ?? {};
  }
}

/** 404 `not_found` for an object that is not there (or not the caller's): "No such <what>." */
export function notFound(what: string, param?: string): ApiError {
  return new ApiError("not_found", `No such ${what}.`, param ? { param } : {});
}

export const ErrorBodySchema = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES).openapi({
        description:
          "What went wrong, for programs: decide on it, not on `message`. An operation lists the codes it answers.",
        example: "invalid_query",
      }),
      message: z.string().openapi({ example: "limit must be between 1 and 100" }),
      param: z.string().optional().openapi({ example: "limit" }),
      requestId: z.string().openapi({ example: "req_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    }),
  })
  .openapi("Error");

export type ErrorBody = z.infer<typeof ErrorBodySchema>;

export function errorBody(requestId: string, code: ErrorCode, message: string, param?: string): ErrorBody {
  return { error: { code, message, ...(param ? { param } : {}), requestId } };
}

export function errorResponse(c: Context, err: ApiError): Response {
  const requestId: string = c.get("requestId") ?? "";
  for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
  return c.json(errorBody(requestId, err.code, err.message, err.param), errorStatus[err.code]);
}

/** The single onError: our errors as they are, Hono's mapped to our codes, anything else a logged 500. */
export function onError(log: Logger) {
  return (err: Error, c: Context): Response => {
    if (err instanceof ApiError) return errorResponse(c, err);
    if (err instanceof z.ZodError) {
      const { message, param } = describeIssues(err.issues);
      return errorResponse(c, new ApiError("invalid_request", message, param ? { param } : {}));
    }
    if (err instanceof HTTPException) {
      const status = err.status;
      const code: ErrorCode =
        status === 413
          ? "payload_too_large"
          : status === 415
            ? "unsupported_media_type"
            : status === 401
              ? "invalid_key"
              : status === 404
                ? "not_found"
                : status < 500
                  ? "invalid_request"
                  : "internal_error";
      const message = status < 500 && err.message ? err.message : defaultMessage(code);
      return errorResponse(c, new ApiError(code, message));
    }
    log.error("unhandled error", {
      requestId: c.get("requestId"),
      error: err instanceof Error ? err.message : String(err),
      stack: err instanceof Error ? err.stack : undefined,
    });
    return errorResponse(c, new ApiError("internal_error", "An internal error occurred."));
  };
}

/**
 * Hono hands only Error instances to onError; any other thrown value (a string, a plain object) would
 * escape to the runtime, which answers with its own page. Mounted right after the request context, this
 * turns such a value into an Error, so onError answers it like any bug: logged, 500 `internal_error`.
 */
export const thrownValuesAsErrors: MiddlewareHandler = async (_c, next) => {
  try {
    await next();
  } catch (err) {
    throw err instanceof Error ? err : new Error(`non-Error value thrown: ${String(err)}`);
  }
};

function defaultMessage(code: ErrorCode): string {
  return code === "internal_error" ? "An internal error occurred." : code.replaceAll("_", " ");
}

/** Turns a zod issue list into one clear message and the parameter at fault. */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): { message: string; param?: string } {
  const first = issues[0];
  if (!first) return { message: "Invalid request." };
  if (first.code === "unrecognized_keys") {
    const key = first.keys[0] ?? "";
    const prefix = first.path.map(String).join(".");
    return { message: `Unknown parameter "${key}".`, param: prefix ? `${prefix}.${key}` : key };
  }
  const path = first.path.map(String).join(".");
  if (!path) return { message: first.message };
  return { message: withField(path, first.message), param: path };
}

/**
 * The message names the field once: `to must be a phone number` as written, `phone` + `must be …` as
 * `phone must be …`, and zod's own sentences (`Invalid input: …`) after the field and a colon.
 */
function withField(path: string, message: string): string {
  const field = path.slice(path.lastIndexOf(".") + 1);
  if (message.startsWith(`${path} `) || message.startsWith(`${field} `)) return message;
  return /^[a-z]/.test(message) ? `${path} ${message}` : `${path}: ${message}`;
}

/** A typical message per code, for the examples of the OpenAPI document. */
const exampleMessages: Partial<Record<ErrorCode, [message: string, param?: string]>> = {
  invalid_request: ["to must be a phone number in E.164 format, such as +33612345678", "to"],
  invalid_query: ["limit must be an integer between 1 and 100", "limit"],
  invalid_cursor: ["starting_after does not belong to this list.", "starting_after"],
  invalid_captcha: ["The bot check failed; reload the page and try again."],
  invalid_key: ["Provide a valid secret key as `Authorization: Bearer <key>`."],
  invalid_session_token: ["The session token is wrong, expired or already used."],
  missing_scope: ["This key lacks the scope `calls:read`."],
  agent_not_allowed: ["This key is restricted to other agents.", "agentId"],
  too_many_endpoints: ["This organization already has 20 live webhook endpoints; delete one first."],
  test_mode_not_supported: ["Scheduled tasks have no test mode; use a live key."],
  not_found: ["No such object.", "id"],
  idempotency_key_reused: ["This Idempotency-Key was used with a different body."],
  results_already_reported: ["The results of this call were already reported."],
  call_not_started: ["This call never started: it has no results to report."],
  payload_too_large: ["The body must not exceed 65536 bytes."],
  unsupported_media_type: ["Send the body as JSON with `Content-Type: application/json`."],
  rate_limited: ["Too many web calls from this address; retry later."],
  number_blocked: ["This number is on the organization's do-not-call list.", "to"],
  country_not_allowed: ["Calls to US are not allowed for this organization (allowed: BE, FR).", "to"],
  outside_call_window: [
    "It is outside the organization's call window (09:00–20:00 Europe/Paris, Monday, Tuesday, Wednesday, " +
      "Thursday, Friday); the window next opens at 2026-11-23T08:00:00.000Z.",
  ],
  concurrency_limit_reached: [
    "The organization has 10 live phone calls in progress, its limit (maxConcurrentCalls).",
  ],
  hourly_limit_reached: [
    "The organization placed 100 live phone calls in the last 60 minutes, its limit (maxCallsPerHour).",
  ],
  internal_error: ["An internal error occurred."],
};

const EXAMPLE_REQUEST_ID = "req_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

/**
 * The schema of one error response: the one envelope (`Error`), its `code` narrowed to the codes this
 * operation answers with this status, so generated clients know them. The narrowing names every field
 * of the envelope again: validators that treat an object's unlisted fields as errors (Redocly's checks
 * of the examples) judge each part of an `allOf` on its own.
 */
function errorSchemaOf(codes: ErrorCode[]) {
  const text = { type: "string" as const };
  return {
    allOf: [
      { $ref: "#/components/schemas/Error" },
      {
        type: "object" as const,
        properties: {
          error: {
            type: "object" as const,
            properties: {
              code: { type: "string" as const, enum: codes },
              message: text,
              param: text,
              requestId: text,
            },
            required: ["code", "message", "requestId"],
          },
        },
        required: ["error"],
      },
    ],
  };
}

/**
 * The refusals of a request's body, possible on every POST, PUT and PATCH (http/body.ts reads the body of
 * each, one the route takes or not): not JSON or invalid, too large, not sent as JSON.
 */
export const BODY_ERRORS = ["invalid_request", "payload_too_large", "unsupported_media_type"] as const;

/**
 * Error responses for OpenAPI, keyed by status, all sharing the one envelope, with an example per code
 * and `error.code` an enum of exactly these codes.
 */
export function errorResponses(...codes: ErrorCode[]) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = errorStatus[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<
    number,
    {
      description: string;
      content: {
        "application/json": {
          schema: ReturnType<typeof errorSchemaOf>;
          examples: Record<string, { summary: string; value: ErrorBody }>;
        };
      };
    }
  > = {};
  for (const [status, list] of byStatus) {
    const examples: Record<string, { summary: string; value: ErrorBody }> = {};
    for (const code of list) {
      const [message, param] = exampleMessages[code] ?? [defaultMessage(code)];
      examples[code] = { summary: code, value: errorBody(EXAMPLE_REQUEST_ID, code, message, param) };
    }
    out[status] = {
      description: list.map((c) => `\`${c}\``).join(", "),
      content: { "application/json": { schema: errorSchemaOf(list), examples } },
    };
  }
  return out;
}
