import { API_ERROR_CODES, type WidgetErrorCode } from "./types.ts";

/** A failure with the code the widget reports. */
export class WidgetError extends Error {
  constructor(readonly code: WidgetErrorCode) {
    super(code);
  }
}

export type CallAnswer =
  | { kind: "simulated"; callId: string; maxSeconds: number }
  | { kind: "live"; callId: string; maxSeconds: number; serverUrl: string; participantToken: string };

/** The part of `fetch` the widget uses. */
export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

export type CallRequest = { publishableKey: string; captchaToken: string } | { sessionToken: string };

/**
 * `POST {apiBase}/web-calls`. The credential travels in the body only; no cookie
 * is sent. Error answers map to the API's code when the widget knows it, else `unknown`.
 */
export async function startWebCall(
  fetchFn: FetchLike,
  apiBase: string,
  body: CallRequest,
  signal: AbortSignal,
): Promise<CallAnswer> {
  let res: Response;
  try {
    res = await fetchFn(`${apiBase}/web-calls`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
      signal,
    });
  } catch (err) {
    if (signal.aborted) throw err;
    throw new WidgetError("network_error");
  }
  const json = await res.json().catch(() => null);
  if (!res.ok) throw new WidgetError(errorCode(json));
  return parseAnswer(json);
}

function errorCode(json: unknown): WidgetErrorCode {
  const code = (json as { error?: { code?: unknown } } | null)?.error?.code;
  return (API_ERROR_CODES as readonly unknown[]).includes(code) ? (code as WidgetErrorCode) : "unknown";
}

function parseAnswer(json: unknown): CallAnswer {
  const a = (json ?? {}) as Record<string, unknown>;
  const room = (a.room ?? {}) as Record<string, unknown>;
  const callId = typeof a.callId === "string" ? a.callId : "";
  const maxSeconds = typeof a.maxSeconds === "number" && a.maxSeconds > 0 ? a.maxSeconds : 600;
  if (a.simulated === true) return { kind: "simulated", callId, maxSeconds };
  if (typeof room.serverUrl === "string" && typeof room.participantToken === "string") {
    return {
      kind: "live",
      callId,
      maxSeconds,
      serverUrl: room.serverUrl,
      participantToken: room.participantToken,
    };
  }
  throw new WidgetError("unknown");
}
