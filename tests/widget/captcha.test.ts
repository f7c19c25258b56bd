/**
 * The bot check loader against a local stand-in of reCAPTCHA v3's api.js (same global API:
 * `grecaptcha.ready(cb)`, `grecaptcha.execute(siteKey, {action})` → Promise<token>).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Window } from "happy-dom";
import { captchaToken, loadCaptcha, releaseCaptcha } from "../../widget/src/captcha.ts";

let server: ReturnType<typeof Bun.serve>;
let base: string;
let holdBadge: Promise<void> | null = null;
const loads: string[] = [];

const FAKE_API = `
window.grecaptcha = {
  ready: function (cb) { setTimeout(cb, 0); },
  execute: function (siteKey, opts) {
    if (siteKey === "refused") return Promise.reject(new Error("invalid site key"));
    return Promise.resolve("token:" + siteKey + ":" + opts.action);
  },
};`;

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const url = new URL(req.url);
      loads.push(url.pathname + url.search);
      if (url.pathname === "/badge/recaptcha/api.js") {
        // Held back while the test says so, to destroy a widget during the load.
        if (holdBadge) await holdBadge;
        // Like the real api.js: a second script of its own (not run here), and the badge at the end of
        // the body.
        return new Response(
          `${FAKE_API}
var s = document.createElement("script"); s.type = "text/x-inner"; s.src = "https://www.gstatic.com/recaptcha/releases/x/recaptcha__en.js"; document.head.appendChild(s);
var b = document.createElement("div"); b.innerHTML = '<div class="grecaptcha-badge" id="badge"></div>'; document.body.appendChild(b);`,
          { headers: { "content-type": "text/javascript" } },
        );
      }
      if (url.pathname === "/recaptcha/api.js") {
        return new Response(FAKE_API, { headers: { "content-type": "text/javascript" } });
      }
      return new Response("gone", { status: 404 });
    },
  });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(() => server.stop(true));

/** Lets the promise callbacks of a settled load run. */
const settle = () => new Promise((r) => setTimeout(r, 20));

function page() {
  const window = new Window({
    url: "http://shop.example.com/",
    settings: { enableJavaScriptEvaluation: true, suppressInsecureJavaScriptEnvironmentWarning: true },
  });
  return { window, document: window.document as unknown as Document };
}

describe("bot check", () => {
  test("loads api.js?render=<siteKey> once per page and executes the action web_call", async () => {
    const { window, document } = page();
    loads.length = 0;
    const url = `${base}/recaptcha/api.js`;
    expect(await captchaToken(document, url, "6Lc site/key", {})).toBe("token:6Lc site/key:web_call");
    expect(await captchaToken(document, url, "6Lc site/key", {})).toBe("token:6Lc site/key:web_call");
    expect(loads).toEqual(["/recaptcha/api.js?render=6Lc%20site%2Fkey"]);
    expect(document.querySelectorAll("script")).toHaveLength(1);
    await window.happyDOM.close();
  });

  test("a script that cannot load is network_error, and the next attempt loads it again", async () => {
    const { window, document } = page();
    loads.length = 0;
    const missing = `${base}/missing/api.js`;
    await expect(loadCaptcha(document, missing, "k", {})).rejects.toMatchObject({ code: "network_error" });
    expect(document.querySelectorAll("script")).toHaveLength(0);
    await expect(loadCaptcha(document, missing, "k", {})).rejects.toMatchObject({ code: "network_error" });
    expect(loads).toEqual(["/missing/api.js?render=k", "/missing/api.js?render=k"]);
    await window.happyDOM.close();
  });

  test("the last widget to let go takes the scripts and what reCAPTCHA added away; the page's own nodes stay", async () => {
    const { window, document } = page();
    loads.length = 0;
    const url = `${base}/badge/recaptcha/api.js`;
    const [first, second] = [{}, {}];
    await loadCaptcha(document, url, "k", first);
    // Another site key on the same page, for another widget.
    await loadCaptcha(document, url, "k2", second);
    const own = document.createElement("div");
    own.id = "page-own";
    document.body.appendChild(own);
    const present = () =>
      [...document.querySelectorAll("script, .grecaptcha-badge, #page-own")]
        .map((e) => e.id || e.tagName)
        .sort();
    expect(present()).toEqual(["SCRIPT", "SCRIPT", "SCRIPT", "SCRIPT", "badge", "badge", "page-own"].sort());
    releaseCaptcha(document, first);
    await settle();
    // The other widget still uses reCAPTCHA: everything stays.
    expect(present()).toHaveLength(7);
    releaseCaptcha(document, second);
    await settle();
    expect(present()).toEqual(["page-own"]);
    // A later widget loads it again.
    await loadCaptcha(document, url, "k", {});
    expect(loads).toEqual([
      "/badge/recaptcha/api.js?render=k",
      "/badge/recaptcha/api.js?render=k2",
      "/badge/recaptcha/api.js?render=k",
    ]);
    await window.happyDOM.close();
  });

  test("a page that uses reCAPTCHA itself keeps it: only the widget's own script goes", async () => {
    const { window, document } = page();
    const url = `${base}/badge/recaptcha/api.js`;
    const user = {};
    await loadCaptcha(document, url, "k", user);
    // The page loads its own, for a form, after the widget.
    const pageScript = document.createElement("script");
    pageScript.type = "text/x-page";
    pageScript.src = "https://www.google.com/recaptcha/api.js?render=page-key";
    document.head.appendChild(pageScript);
    releaseCaptcha(document, user);
    await settle();
    expect([...document.querySelectorAll("script")].map((s) => s.getAttribute("src"))).toEqual([
      "https://www.gstatic.com/recaptcha/releases/x/recaptcha__en.js",
      "https://www.google.com/recaptcha/api.js?render=page-key",
    ]);
    expect(document.querySelectorAll(".grecaptcha-badge")).toHaveLength(1);
    await window.happyDOM.close();
  });

  test("destroyed while the script loads: what it adds once loaded goes too", async () => {
    const { window, document } = page();
    let release!: () => void;
    holdBadge = new Promise((r) => (release = r));
    const user = {};
    const loading = loadCaptcha(document, `${base}/badge/recaptcha/api.js`, "k", user).catch(() => {});
    releaseCaptcha(document, user);
    release();
    holdBadge = null;
    await loading;
    await settle();
    expect(document.querySelectorAll("script, .grecaptcha-badge")).toHaveLength(0);
    await window.happyDOM.close();
  });

  test("a check that fails to execute is invalid_captcha", async () => {
    const { window, document } = page();
    await expect(captchaToken(document, `${base}/recaptcha/api.js`, "refused", {})).rejects.toMatchObject({
      code: "invalid_captcha",
    });
    await window.happyDOM.close();
  });
});
