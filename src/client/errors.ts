import type { ErrorCode } from "./types.ts";

/** The error envelope every refusal of the API answers with: `{ error: { code, message, param?, requestId } }`. */
export interface ApiErrorBody {
  error: { code: string; message: string; param?: string; requestId: string };
}

/**
 * A refusal of the API, or an answer the client could not read. Decide on `code` (stable), not on
 * `message` (for people). `status` is 0 when no answer arrived (network failure, `code`
 * `connection_error`); an answer that is not the error envelope (a proxy's page) has `code`
 * `unexpected_response`.
 */
export class VoiceServiceError extends Error {
  override readonly name = "VoiceServiceError";
  readonly status: number;
  readonly code: ErrorCode;
  /** The request field or parameter at fault, when one is. */
  readonly param: string | undefined;
  /** The `X-Request-Id` of the answer: quote it when asking about a request. */
  readonly requestId: string | undefined;
  /** Seconds the server asked to wait (`Retry-After`), when it did. */
  readonly retryAfter: number | undefined;

  constructor(init: {
    status: number;
    code: ErrorCode;
    message: string;
    param?: string | undefined;
    requestId?: string | undefined;
    retryAfter?: number | undefined;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.param = init.param;
    this.requestId = init.requestId;
    this.retryAfter = init.retryAfter;
  }

  /** Reads an error answer (its body is consumed). */
  static async fromResponse(res: Response): Promise<VoiceServiceError> {
    const requestId = res.headers.get("x-request-id") ?? undefined;
    const retryAfter = retryAfterSeconds(res.headers.get("retry-after"));
    const text = await res.text().catch(() => "");
    let body: Partial<ApiErrorBody> | undefined;
    try {
      body = JSON.parse(text) as Partial<ApiErrorBody>;
    } catch {
      body = undefined;
    }
    const err = body?.error;
    if (err && typeof err.code === "string" && typeof err.message === "string") {
      return new VoiceServiceError({
        status: res.status,
        code: err.code,
        message: err.message,
        param: err.param,
        requestId: err.requestId ?? requestId,
        retryAfter,
      });
    }
    return new VoiceServiceError({
      status: res.status,
      code: "unexpected_response",
      message: `HTTP ${res.status} without the API's error envelope: ${text.slice(0, 200)}`,
      requestId,
      retryAfter,
    });
  }
}

/** `Retry-After` as seconds: a number of seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterSeconds(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/** A webhook delivery that is not proven to come from the service: do not act on it. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
}
