import { resolveLang } from "./i18n.ts";
import type { Lang, StateData, WidgetOptions } from "./types.ts";

/** How the widget proves it may start a call. */
export type Credential =
  | { kind: "publishable"; key: string; siteKey: string }
  /** A token given once (attribute or option): `token` becomes null once it has been sent. */
  | { kind: "single-token"; token: string | null }
  | { kind: "token-source"; get: () => string | Promise<string> };

/** The options with every default applied. */
export interface Config {
  credential: Credential;
  lang: Lang;
  label: string | undefined;
  apiBase: string;
  /** The element receiving the button, or null to float at the bottom right. */
  target: Element | null;
  onStateChange: ((data: StateData) => void) | undefined;
  captchaScriptUrl: string;
  mediaUrl: string;
}

export const RECAPTCHA_SCRIPT_URL = "https://www.google.com/recaptcha/api.js";

/**
 * The options of a `<script data-…>` tag. The session token attribute is removed from the page
 * as soon as it is read, so it stays in memory only.
 */
export function readScriptAttributes(script: HTMLElement): WidgetOptions {
  // `dataset` names them as the options are named: data-captcha-site-key is captchaSiteKey.
  const { sessionToken, key, captchaSiteKey, target, lang, label, apiBase } = script.dataset;
  script.removeAttribute("data-session-token");
  return { sessionToken, key, captchaSiteKey, target, lang, label, apiBase };
}

export function wantsButton(script: Element): boolean {
  return script.hasAttribute("data-key") || script.hasAttribute("data-session-token");
}

/**
 * Applies the defaults of the widget configuration. Configuration mistakes throw with a
 * message for the integrator; the message never repeats a key or token.
 */
export function resolveConfig(options: WidgetOptions, doc: Document, scriptUrl: string | undefined): Config {
  const base = scriptUrl ?? doc.location?.href ?? "";
  return {
    credential: resolveCredential(options),
    lang: resolveLang(options.lang || doc.documentElement?.getAttribute("lang")),
    label: options.label?.trim() ? options.label.trim() : undefined,
    apiBase: (options.apiBase || `${new URL(base).origin}/api/v1`).replace(/\/+$/, ""),
    target: resolveTarget(options.target, doc),
    onStateChange: typeof options.onStateChange === "function" ? options.onStateChange : undefined,
    captchaScriptUrl: options.captchaScriptUrl || RECAPTCHA_SCRIPT_URL,
    mediaUrl: options.mediaUrl || new URL("v1/media.js", base).href,
  };
}

function resolveCredential(options: WidgetOptions): Credential {
  if (typeof options.getSessionToken === "function")
    return { kind: "token-source", get: options.getSessionToken };
  if (options.sessionToken !== undefined)
    return { kind: "single-token", token: options.sessionToken || null };
  if (options.key && options.captchaSiteKey) {
    return { kind: "publishable", key: options.key, siteKey: options.captchaSiteKey };
  }
  // One message for a missing credential and for a key without its site key (every byte of v1.js counts).
  throw new Error("ServiceWidget: give key and captchaSiteKey, sessionToken or getSessionToken.");
}

function resolveTarget(target: WidgetOptions["target"], doc: Document): Element | null {
  if (!target) return null;
  if (typeof target !== "string") return target;
  const found = doc.querySelector(target);
  if (!found) throw new Error(`ServiceWidget: no element matches the target "${target}".`);
  return found;
}
