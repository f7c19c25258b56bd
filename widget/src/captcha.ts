import { WidgetError } from "./api.ts";

interface Grecaptcha {
  ready(cb: () => void): void;
  execute(siteKey: string, opts: { action: string }): Promise<string>;
}

/** One load per page and script address, shared by every widget of the page. */
const loads = new WeakMap<Document, Map<string, Promise<Grecaptcha>>>();

/**
 * Loads the bot check script (reCAPTCHA v3, `?render=<siteKey>`) once. Called on the first
 * pointer-enter, focus or click of a widget using a publishable key, never before.
 */
export function loadCaptcha(doc: Document, scriptUrl: string, siteKey: string): Promise<Grecaptcha> {
  const url = `${scriptUrl}?render=${encodeURIComponent(siteKey)}`;
  const byUrl = loads.get(doc) ?? new Map<string, Promise<Grecaptcha>>();
  loads.set(doc, byUrl);
  const cached = byUrl.get(url);
  if (cached) return cached;
  const loading = new Promise<Grecaptcha>((resolve, reject) => {
    const script = doc.createElement("script");
    script.src = url;
    script.async = true;
    script.onload = () => {
      const g = (doc.defaultView as unknown as { grecaptcha?: Grecaptcha } | null)?.grecaptcha;
      if (g) resolve(g);
      else reject(new WidgetError("network_error"));
    };
    script.onerror = () => {
      script.remove();
      reject(new WidgetError("network_error"));
    };
    (doc.head ?? doc.documentElement).appendChild(script);
  });
  // A failed load may be retried on the next click.
  loading.catch(() => byUrl.delete(url));
  byUrl.set(url, loading);
  return loading;
}

/** A fresh bot check token for the action `web_call` (tokens expire quickly: asked just before the call). */
export async function captchaToken(doc: Document, scriptUrl: string, siteKey: string): Promise<string> {
  const g = await loadCaptcha(doc, scriptUrl, siteKey);
  try {
    const token = await new Promise<string>((resolve, reject) =>
      g.ready(() => g.execute(siteKey, { action: "web_call" }).then(resolve, reject)),
    );
    if (typeof token === "string" && token) return token;
  } catch {
    // Falls through: the check could not run.
  }
  throw new WidgetError("invalid_captcha");
}
