import { WidgetError } from "./api.ts";

interface Grecaptcha {
  ready(cb: () => void): void;
  execute(siteKey: string, opts: { action: string }): Promise<string>;
}

/** The bot check on one page: its loads (one per script address) and the widgets using them. */
interface PageCaptcha {
  loads: Map<string, { loading: Promise<Grecaptcha>; script: HTMLScriptElement }>;
  users: Set<object>;
}

const pages = new WeakMap<Document, PageCaptcha>();

/**
 * Loads the bot check script (reCAPTCHA v3, `?render=<siteKey>`) once per page and address, for `user`
 * (a widget). Called on the first pointer-enter, focus or click of a widget using a publishable key.
 */
export function loadCaptcha(
  doc: Document,
  scriptUrl: string,
  siteKey: string,
  user: object,
): Promise<Grecaptcha> {
  const url = `${scriptUrl}?render=${encodeURIComponent(siteKey)}`;
  let page = pages.get(doc);
  if (!page) {
    page = { loads: new Map(), users: new Set() };
    pages.set(doc, page);
  }
  page.users.add(user);
  const loads = page.loads;
  let load = loads.get(url);
  if (!load) {
    const script = doc.createElement("script");
    const win = doc.defaultView as unknown as { grecaptcha?: Grecaptcha } | null;
    const loading = new Promise<Grecaptcha>((resolve, reject) => {
      script.src = url;
      script.async = true;
      script.onload = () =>
        win?.grecaptcha ? resolve(win.grecaptcha) : reject(new WidgetError("network_error"));
      script.onerror = () => reject(new WidgetError("network_error"));
    });
    load = { loading, script };
    // A failed load leaves nothing behind and may be retried on the next click.
    loading.catch(() => {
      script.remove();
      loads.delete(url);
    });
    loads.set(url, load);
    (doc.head ?? doc.documentElement).appendChild(script);
  }
  return load.loading;
}

/**
 * `user` (a widget being destroyed) no longer needs the bot check. When no widget of the page does,
 * its scripts go, once they have settled; and when no other script of reCAPTCHA is left on the page
 * (the page does not use it itself), what reCAPTCHA added goes too: its second script and its badge.
 */
export function releaseCaptcha(doc: Document, user: object): void {
  const page = pages.get(doc);
  if (!page?.users.delete(user) || page.users.size > 0) return;
  pages.delete(doc);
  for (const { loading, script } of page.loads.values()) {
    const remove = () => {
      script.remove();
      if (doc.querySelector('script[src*="/recaptcha/api.js"]')) return;
      for (const s of doc.querySelectorAll('script[src*="/recaptcha/"]')) s.remove();
      for (const b of doc.querySelectorAll(".grecaptcha-badge")) b.parentElement?.remove();
    };
    loading.then(remove, remove);
  }
}

/** A fresh bot check token for the action `web_call` (tokens expire quickly: asked just before the call). */
export async function captchaToken(
  doc: Document,
  scriptUrl: string,
  siteKey: string,
  user: object,
): Promise<string> {
  const g = await loadCaptcha(doc, scriptUrl, siteKey, user);
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
