/**
 * The bot check loader against a local stand-in of reCAPTCHA v3's api.js (same global API:
 * `grecaptcha.ready(cb)`, `grecaptcha.execute(siteKey, {action})` → Promise<token>).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Window } from "happy-dom";
import { captchaToken, loadCaptcha, releaseCaptcha } from "../../widget/src/captcha.ts";

let server: ReturnType<typeof Bun.serve>;
let base: string;
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
    fetch: (req) => {
      const url = new URL(req.url);
      loads.push(url.pathname + url.search);
      if (url.pathname === "/recaptcha/badge.js") {
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

  test("the last widget to let go takes the script and what it added away; the page's own nodes stay", async () => {
    const { window, document } = page();
    loads.length = 0;
    const url = `${base}/recaptcha/badge.js`;
    const [first, second] = [{}, {}];
    await loadCaptcha(document, url, "k", first);
    await loadCaptcha(document, url, "k", second);
    await new Promise((r) => setTimeout(r, 20));
    const own = document.createElement("div");
    own.id = "page-own";
    document.body.appendChild(own);
    const added = () =>
      [...document.querySelectorAll("script, .grecaptcha-badge, #page-own")].map((e) => e.id || e.tagName);
    expect(added().sort()).toEqual(["SCRIPT", "SCRIPT", "badge", "page-own"].sort());
    releaseCaptcha(document, url, "k", first);
    expect(added()).toHaveLength(4);
    releaseCaptcha(document, url, "k", second);
    expect(added()).toEqual(["page-own"]);
    // A later widget loads it again.
    await loadCaptcha(document, url, "k", {});
    expect(loads).toEqual(["/recaptcha/badge.js?render=k", "/recaptcha/badge.js?render=k"]);
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
