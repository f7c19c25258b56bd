import type { Env } from "../env.ts";

/**
 * The score-based bot check (version 3) that protects publishable keys. The
 * verifier is asked with a form POST of `secret`, `response` and `remoteip`; a token passes only when
 * the answer says `success`, the score reaches RECAPTCHA_MIN_SCORE, the action is `web_call` and the
 * hostname is the host of the request's Origin. A token used twice is the verifier's to refuse (it
 * answers `success: false`, `timeout-or-duplicate`): nothing here remembers tokens, so a token passes
 * exactly when the verifier's answer meets those conditions. Without RECAPTCHA_SECRET nothing passes.
 */

export const CAPTCHA_ACTION = "web_call";
export const CAPTCHA_TIMEOUT_MS = 5000;
/** Far above any real token; anything longer is refused without asking the verifier. */
const MAX_TOKEN_LENGTH = 8192;

export type CaptchaRefusal =
  | "not_configured"
  | "missing_token"
  | "missing_origin"
  | "verifier_unreachable"
  | "rejected"
  | "low_score"
  | "wrong_action"
  | "wrong_hostname";

/** `score` is the verifier's score whenever it gave one, accepted or not (for the keys' abuse view). */
export type CaptchaResult =
  | { ok: true; score: number }
  | { ok: false; reason: CaptchaRefusal; score?: number };

export interface CaptchaInput {
  /** The `captchaToken` of the request body, as received (anything that is not a string is missing). */
  token: unknown;
  /** The client address the server resolved; sent as `remoteip`. */
  remoteIp: string;
  /** The request's `Origin` header. */
  origin: string | undefined;
}

export interface CaptchaDeps {
  env: Pick<Env, "RECAPTCHA_SECRET" | "RECAPTCHA_VERIFY_URL" | "RECAPTCHA_MIN_SCORE">;
  /** Overrides the 5 s limit on the verifier's answer. */
  timeoutMs?: number;
}

interface SiteverifyAnswer {
  success?: unknown;
  score?: unknown;
  action?: unknown;
  hostname?: unknown;
}

/** The reason is for logs and tests; the caller answers every refusal 400 `invalid_captcha`. */
export async function verifyCaptcha(deps: CaptchaDeps, input: CaptchaInput): Promise<CaptchaResult> {
  const secret = deps.env.RECAPTCHA_SECRET;
  if (!secret) return { ok: false, reason: "not_configured" };
  const token = input.token;
  if (typeof token !== "string" || token.length === 0 || token.length > MAX_TOKEN_LENGTH) {
    return { ok: false, reason: "missing_token" };
  }
  const expectedHost = originHost(input.origin);
  if (!expectedHost) return { ok: false, reason: "missing_origin" };

  let answer: SiteverifyAnswer;
  try {
    const res = await fetch(deps.env.RECAPTCHA_VERIFY_URL, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ secret, response: token, remoteip: input.remoteIp }),
      signal: AbortSignal.timeout(deps.timeoutMs ?? CAPTCHA_TIMEOUT_MS),
    });
    if (!res.ok) return { ok: false, reason: "verifier_unreachable" };
    answer = (await res.json()) as SiteverifyAnswer;
  } catch {
    return { ok: false, reason: "verifier_unreachable" };
  }
  if (answer === null || typeof answer !== "object" || answer.success !== true) {
    return { ok: false, reason: "rejected" };
  }
  const score = typeof answer.score === "number" ? answer.score : Number.NaN;
  const scored = Number.isFinite(score) && score >= 0 && score <= 1 ? { score } : {};
  if (!(score >= deps.env.RECAPTCHA_MIN_SCORE)) return { ok: false, reason: "low_score", ...scored };
  if (answer.action !== CAPTCHA_ACTION) return { ok: false, reason: "wrong_action", ...scored };
  if (typeof answer.hostname !== "string" || answer.hostname.toLowerCase() !== expectedHost) {
    return { ok: false, reason: "wrong_hostname", ...scored };
  }
  return { ok: true, score };
}

/** The host name of an Origin header (`https://shop.example.com:8443` → `shop.example.com`), or null. */
function originHost(origin: string | undefined): string | null {
  if (!origin || origin === "null") return null;
  try {
    const url = new URL(origin);
    return url.protocol === "http:" || url.protocol === "https:" ? url.hostname.toLowerCase() : null;
  } catch {
    return null;
  }
}
