import { WidgetError } from "./api.ts";

interface Grecaptcha {
  ready(cb: () => void): void;
  execute(siteKey: string, opts: { action: string }): Promise<string>;
}

/** One load of the bot check script on a page, shared by the widgets that use it. */
interface Load {
  loading: Promise<Grecaptcha>;
  script: HTMLScriptElement;
  /** The widgets using it: the last one destroyed takes it away. */
  users: Set<object>;
  /** Whether the page had reCAPTCHA of its own before: then what reCAPTCHA adds is not ours to remove. */
  pageHadIt: boolean;
}

/** One load per page and script address, shared by every widget of the page. */
const loads = new WeakMap<Document, Map<string, Load>>();

const address = (scriptUrl: string, siteKey: string) => `${scriptUrl}?render=${encodeURIComponent(siteKey)}`;

/**
 * Loads the bot check script (reCAPTCHA v3, `?render=<siteKey>`) once per page for `user` (a widget).
 * Called on the first pointer-enter, focus or click of a widget using a publishable key, never before.
 */
export function loadCaptcha(
  doc: Document,
  scriptUrl: string,
  siteKey: string,
  user: object,
): Promise<Grecaptcha> {
  const url = address(scriptUrl, siteKey);
  const byUrl = loads.get(doc) ?? new Map<string, Load>();
  loads.set(doc, byUrl);
  const win = doc.defaultView as unknown as { grecaptcha?: Grecaptcha } | null;
  let load = byUrl.get(url);
  if (!load) {
    const script = doc.createElement("script");
    const loading = new Promise<Grecaptcha>((resolve, reject) => {
      script.src = url;
      script.async = true;
      script.onload = () =>
        win?.grecaptcha ? resolve(win.grecaptcha) : reject(new WidgetError("network_error"));
      script.onerror = () => reject(new WidgetError("network_error"));
    });
    const created: Load = { loading, script, users: new Set(), pageHadIt: !!win?.grecaptcha || !!badge(doc) };
    // A failed load leaves nothing behind and may be retried on the next click.
    loading.catch(() => byUrl.get(url) === created && remove(doc, byUrl, url, created));
    byUrl.set(url, created);
    (doc.head ?? doc.documentElement).appendChild(script);
    load = created;
  }
  load.users.add(user);
  return load.loading;
}

const badge = (doc: Document) => doc.querySelector(".grecaptcha-badge");

function remove(doc: Document, byUrl: Map<string, Load>, url: string, load: Load): void {
  load.script.remove();
  byUrl.delete(url);
  if (load.pageHadIt) return;
  // What reCAPTCHA's script added itself: its second script (from gstatic.com) and its badge's box.
  for (const s of doc.querySelectorAll('script[src^="https://www.gstatic.com/recaptcha/"]')) s.remove();
  badge(doc)?.parentElement?.remove();
}

/**
 * `user` (a widget being destroyed) no longer needs the bot check: when no other widget of the page
 * does, its script and what it added to the page go too, so that destroy() leaves the page as it was.
 */
export function releaseCaptcha(doc: Document, scriptUrl: string, siteKey: string, user: object): void {
  const url = address(scriptUrl, siteKey);
  const byUrl = loads.get(doc);
  const load = byUrl?.get(url);
  if (byUrl && load?.users.delete(user) && load.users.size === 0) remove(doc, byUrl, url, load);
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
