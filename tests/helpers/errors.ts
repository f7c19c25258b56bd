import type { ErrorCode } from "../../src/errors.ts";

/** The one error envelope every refusal of the API answers with. */
export interface ApiErrorBody {
  error: { code: string; message: string; param?: string; requestId: string };
}

/** The request id every answer carries: `req_` and a ULID. */
export const REQUEST_ID = /^req_[0-9A-HJKMNP-TV-Z]{26}$/;

export interface ExpectedApiError {
  /** The field the error names; omitted, the error must name none. */
  param?: string;
  /** Said in the failure message (a path, a case), for checks made in a loop. */
  label?: string;
}

/**
 * Checks an error answer and returns its parsed body for further assertions:
 * - the status and the code (either may be a list of accepted values), and the param exactly
 *   (`opts.param`, or no param at all);
 * - the envelope: a JSON body `{error: {code, message, param?, requestId}}` and nothing else, a
 *   message that says something, `requestId` a `req_` ULID equal to the X-Request-Id header, no
 *   stack trace anywhere in the body.
 * The response body is left unread (a clone is read), so the caller may still read it.
 */
export async function expectApiError(
  res: Response,
  status: number | readonly number[],
  code: ErrorCode | readonly ErrorCode[],
  opts: ExpectedApiError = {},
): Promise<ApiErrorBody> {
  const text = await res.clone().text();
  const problems = envelopeProblems(res, text);
  let err: Partial<ApiErrorBody["error"]> = {};
  try {
    err = JSON.parse(text)?.error ?? {};
  } catch {
    // envelopeProblems said so
  }
  if (!oneOf(status, res.status)) problems.push(`status ${res.status}, expected ${String(status)}`);
  if (!oneOf(code, err.code)) problems.push(`code ${String(err.code)}, expected ${String(code)}`);
  if (err.param !== opts.param) problems.push(`param ${String(err.param)}, expected ${String(opts.param)}`);
  if (problems.length) {
    const where = opts.label ? `${opts.label}: ` : "";
    throw new Error(`${where}not the expected error (${problems.join("; ")}): ${res.status} ${text}`);
  }
  return JSON.parse(text) as ApiErrorBody;
}

/**
 * "201 ok" for a success, "429 rate_limited" for a refusal (whose envelope is checked as
 * expectApiError does): for requests whose outcomes are compared as a whole, such as concurrent ones.
 */
export async function outcomeOf(res: Response): Promise<string> {
  if (res.status < 400) return `${res.status} ok`;
  const text = await res.clone().text();
  const problems = envelopeProblems(res, text);
  if (problems.length) throw new Error(`bad error envelope (${problems.join("; ")}): ${res.status} ${text}`);
  return `${res.status} ${JSON.parse(text).error.code}`;
}

/** `    at fn (file.ts:1:2)` lines, or a source path with a line number. */
export function looksLikeStackTrace(text: string): boolean {
  return /\bat .*[(\s/]\S+\.(ts|js|mjs):\d+/.test(text) || /\n\s+at /.test(text);
}

function envelopeProblems(res: Response, text: string): string[] {
  const problems: string[] = [];
  if (!/^application\/json\b/.test(res.headers.get("content-type") ?? "")) problems.push("not JSON");
  let body: { error?: Record<string, unknown> } = {};
  try {
    body = JSON.parse(text) ?? {};
  } catch {
    problems.push("unparsable body");
  }
  if (Object.keys(body).join() !== "error") problems.push(`top-level keys ${Object.keys(body).join()}`);
  const err = typeof body.error === "object" && body.error !== null ? body.error : {};
  if (err !== body.error) problems.push("error is not an object");
  const extra = Object.keys(err).filter((k) => !["code", "message", "param", "requestId"].includes(k));
  if (extra.length) problems.push(`unexpected fields ${extra.join()}`);
  if (typeof err.code !== "string") problems.push("no code");
  // Short enough to allow "Not found", long enough to refuse an empty or placeholder message.
  if (typeof err.message !== "string" || err.message.trim().length <= 5) problems.push("no message");
  if ("param" in err && typeof err.param !== "string") problems.push("param not a string");
  const header = res.headers.get("x-request-id");
  if (typeof err.requestId !== "string" || !REQUEST_ID.test(err.requestId) || err.requestId !== header) {
    problems.push(`requestId ${String(err.requestId)} vs X-Request-Id ${header}`);
  }
  if (looksLikeStackTrace(text)) problems.push("stack trace in body");
  return problems;
}

function oneOf<T>(expected: T | readonly T[], actual: unknown): boolean {
  return Array.isArray(expected) ? expected.includes(actual) : expected === actual;
}

/**
 * A message that names its field twice, as `"to: to must be …"`: the field (its whole path or its last
 * part), then the field again, after a colon or a space.
 */
export function repeatsField(message: string, param: string): boolean {
  const names = [param, param.slice(param.lastIndexOf(".") + 1)];
  return names.some((name) =>
    [": ", " "].some((sep) => {
      if (!message.startsWith(name + sep)) return false;
      const rest = message.slice(name.length + sep.length);
      return names.some((again) => rest.startsWith(`${again} `) || rest.startsWith(`${again}:`));
    }),
  );
}
