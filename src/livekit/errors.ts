import { ServerError } from "livekit-server-sdk";

/** The LiveKit request that failed (Twirp method names, plus signing a participant token). */
export type LiveKitStep =
  | "CreateRoom"
  | "DeleteRoom"
  | "CreateDispatch"
  | "AccessToken"
  | "CreateSIPParticipant"
  | "ListParticipants"
  | "ListRooms";

/**
 * Why a LiveKit request failed, when there was no Twirp answer to name it: `timeout` (no answer
 * within the request timeout), `network_error` (refused, reset or dropped connection), `invalid_answer`
 * (a success that could not be read), `unknown` (anything else). Otherwise the code is LiveKit's own
 * Twirp code (`not_found`, `unavailable`, `resource_exhausted`, …), or `http_<status>` when the answer
 * carried none.
 */
export type LiveKitLocalCode = "timeout" | "network_error" | "invalid_answer" | "unknown";

const MAX_DETAIL = 300;
/** A signed token of any kind (JWT: three base64url parts, the first a JSON header). */
const JWT = /eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g;

/**
 * A LiveKit request failed. Carries what callers decide on (`code`, `sipStatusCode`) and a message
 * fit for logs: the server's words with any token or the API secret masked, never the request itself.
 * The original error is not kept, so nothing it might hold can leak through this one.
 */
export class LiveKitError extends Error {
  readonly step: LiveKitStep;
  readonly code: string;
  /** The HTTP status of LiveKit's answer, or null when there was none. */
  readonly httpStatus: number | null;
  /** The SIP response code of a failed dial (LiveKit's `sip_status_code`), e.g. 486. */
  readonly sipStatusCode: number | null;
  /** The SIP reason phrase of a failed dial, e.g. "Busy Here". */
  readonly sipStatus: string | null;
  /** LiveKit's message (or the local failure's), secrets masked. */
  readonly detail: string;

  constructor(
    step: LiveKitStep,
    fields: {
      code: string;
      detail: string;
      httpStatus?: number | null;
      sipStatusCode?: number | null;
      sipStatus?: string | null;
    },
  ) {
    super(`${step} failed (${fields.code}): ${fields.detail}`);
    this.name = "LiveKitError";
    this.step = step;
    this.code = fields.code;
    this.httpStatus = fields.httpStatus ?? null;
    this.sipStatusCode = fields.sipStatusCode ?? null;
    this.sipStatus = fields.sipStatus ?? null;
    this.detail = fields.detail;
  }

  /**
   * The error for what the SDK threw: its Twirp error (with the SIP status LiveKit attaches to a failed
   * dial), an aborted request, a network failure, or anything else. `secrets` are masked from the text.
   */
  static from(step: LiveKitStep, cause: unknown, secrets: readonly string[] = []): LiveKitError {
    if (cause instanceof LiveKitError) return cause;
    const clean = (text: string) => mask(text, secrets);
    if (cause instanceof ServerError) {
      const meta = cause.metadata ?? {};
      const sip = Number(meta.sip_status_code);
      const hasSip = meta.sip_status_code !== undefined && Number.isInteger(sip) && sip > 0;
      return new LiveKitError(step, {
        code: cause.code || `http_${cause.status}`,
        detail: clean(cause.message),
        httpStatus: cause.status,
        sipStatusCode: hasSip ? sip : null,
        sipStatus: hasSip && meta.sip_status ? clean(meta.sip_status) : null,
      });
    }
    return new LiveKitError(step, { code: localCode(cause), detail: clean(describe(cause)) });
  }
}

function localCode(cause: unknown): LiveKitLocalCode {
  if (!(cause instanceof Error)) return "unknown";
  // AbortSignal.timeout() rejects the request with a DOMException named TimeoutError.
  if (cause.name === "TimeoutError" || cause.name === "AbortError") return "timeout";
  // A success body that is not JSON (or not the expected message).
  if (cause instanceof SyntaxError) return "invalid_answer";
  // fetch() reports every network failure as a TypeError (Bun adds a system code such as ECONNRESET).
  if (cause instanceof TypeError) return "network_error";
  const sys = (cause as { code?: unknown }).code;
  if (typeof sys === "string" && /^(E[A-Z]+|Connection\w+)$/.test(sys)) return "network_error";
  return "unknown";
}

function describe(cause: unknown): string {
  if (cause instanceof Error) return `${cause.name}: ${cause.message}`;
  try {
    return String(cause);
  } catch {
    // An object without a string form (no prototype, or a throwing toString).
    return Object.prototype.toString.call(cause);
  }
}

function mask(text: string, secrets: readonly string[]): string {
  let out = text.replace(JWT, "[redacted]");
  for (const secret of secrets) if (secret) out = out.split(secret).join("[redacted]");
  return out.length > MAX_DETAIL ? `${out.slice(0, MAX_DETAIL)}…` : out;
}
