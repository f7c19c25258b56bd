import { afterEach, describe, expect, test } from "bun:test";
import { resolveLang } from "../../widget/src/i18n.ts";
import { readScriptAttributes, resolveConfig, wantsButton } from "../../widget/src/options.ts";
import { mount, openPage, type Page, PUBLISHABLE, SCRIPT_URL } from "./harness.ts";

const pages: Page[] = [];
function page(opts: Parameters<typeof openPage>[0] = {}) {
  const p = openPage(opts);
  pages.push(p);
  return p;
}
afterEach(async () => {
  for (const p of pages.splice(0)) await p.close();
});

function scriptTag(p: Page, attributes: Record<string, string>) {
  const script = p.document.createElement("script");
  script.setAttribute("src", SCRIPT_URL);
  for (const [name, value] of Object.entries(attributes)) script.setAttribute(name, value);
  p.document.body.appendChild(script);
  return script;
}

describe("script attributes", () => {
  test("every attribute of the configuration table maps to its option", () => {
    const p = page();
    const script = scriptTag(p, {
      "data-key": PUBLISHABLE.key,
      "data-captcha-site-key": "site",
      "data-target": "#call",
      "data-lang": "fr",
      "data-label": "Appeler",
      "data-api-base": "https://api.example.net/api/v1",
    });
    expect(readScriptAttributes(script)).toEqual({
      key: PUBLISHABLE.key,
      captchaSiteKey: "site",
      target: "#call",
      lang: "fr",
      label: "Appeler",
      apiBase: "https://api.example.net/api/v1",
    });
  });

  test("the session token attribute is removed from the page as soon as it is read", () => {
    const p = page();
    const token = "inf_wcs_9hG2kL5pQ8rT1vX4zB7nM0cF";
    const script = scriptTag(p, { "data-session-token": token });
    expect(wantsButton(script)).toBe(true);
    expect(readScriptAttributes(script)).toEqual({ sessionToken: token });
    expect(script.hasAttribute("data-session-token")).toBe(false);
    expect(p.document.documentElement.outerHTML).not.toContain(token);
  });

  test("a tag without data-key or data-session-token asks for no button", () => {
    const p = page();
    expect(wantsButton(scriptTag(p, {}))).toBe(false);
    expect(wantsButton(scriptTag(p, { "data-lang": "fr", "data-captcha-site-key": "x" }))).toBe(false);
    expect(wantsButton(scriptTag(p, { "data-key": PUBLISHABLE.key }))).toBe(true);
  });
});

describe("defaults", () => {
  test("lang: the option, else the page's lang attribute, else English", () => {
    expect(resolveConfig(PUBLISHABLE, page({ lang: "fr-FR" }).document, SCRIPT_URL).lang).toBe("fr");
    expect(resolveConfig(PUBLISHABLE, page({ lang: "FR" }).document, SCRIPT_URL).lang).toBe("fr");
    expect(resolveConfig(PUBLISHABLE, page({ lang: "de" }).document, SCRIPT_URL).lang).toBe("en");
    expect(resolveConfig(PUBLISHABLE, page().document, SCRIPT_URL).lang).toBe("en");
    expect(
      resolveConfig({ ...PUBLISHABLE, lang: "en" }, page({ lang: "fr" }).document, SCRIPT_URL).lang,
    ).toBe("en");
    expect(
      resolveConfig({ ...PUBLISHABLE, lang: "fr" }, page({ lang: "en" }).document, SCRIPT_URL).lang,
    ).toBe("fr");
    expect(resolveLang("fr_CA")).toBe("fr");
  });

  test("label: the default of each language, or the given one", () => {
    const fr = mount(PUBLISHABLE, { page: page({ lang: "fr" }) });
    expect(fr.button().textContent).toBe("Parler à l'agent");
    const en = mount(PUBLISHABLE, { page: page({ lang: "en" }) });
    expect(en.button().textContent).toBe("Talk to the agent");
    const custom = mount({ ...PUBLISHABLE, label: "Call us" }, { page: page({ lang: "fr" }) });
    expect(custom.button().textContent).toBe("Call us");
    for (const m of [fr, en, custom]) m.widget.destroy();
  });

  test("apiBase: the origin serving the script + /api/v1, whatever the page's origin", () => {
    const p = page({ url: "https://shop.example.com/a/b" });
    const config = resolveConfig(PUBLISHABLE, p.document, "https://voice.example.net:8443/widget/v1.js?x=1");
    expect(config.apiBase).toBe("https://voice.example.net:8443/api/v1");
    expect(config.mediaUrl).toBe("https://voice.example.net:8443/widget/v1/media.js");
    const given = resolveConfig(
      { ...PUBLISHABLE, apiBase: "https://api.example.org/api/v1/" },
      p.document,
      SCRIPT_URL,
    );
    expect(given.apiBase).toBe("https://api.example.org/api/v1");
  });

  test("without a known script address (inlined copy) the page's origin is used", () => {
    const p = page({ url: "https://shop.example.com/a/b" });
    expect(resolveConfig(PUBLISHABLE, p.document, undefined).apiBase).toBe("https://shop.example.com/api/v1");
  });

  test("the bot check script is Google's reCAPTCHA unless replaced", () => {
    const p = page();
    expect(resolveConfig(PUBLISHABLE, p.document, SCRIPT_URL).captchaScriptUrl).toBe(
      "https://www.google.com/recaptcha/api.js",
    );
  });

  test("target: the matched element receives the button; without target it floats", () => {
    const p = page({ body: '<section id="call"></section>' });
    const inside = mount({ ...PUBLISHABLE, target: "#call" }, { page: p });
    expect(inside.host().parentElement?.id).toBe("call");
    expect(inside.host().hasAttribute("data-floating")).toBe(false);
    const floating = mount(PUBLISHABLE, { page: p });
    expect(floating.host().parentElement).toBe(p.document.body as unknown as HTMLElement);
    expect(floating.host().hasAttribute("data-floating")).toBe(true);
    expect(floating.shadow().adoptedStyleSheets[0]!.cssRules[0]).toBeDefined();
    const element = p.document.createElement("div");
    p.document.body.appendChild(element);
    const byElement = mount({ ...PUBLISHABLE, target: element }, { page: p });
    expect(byElement.host().parentElement).toBe(element as unknown as HTMLElement);
    for (const m of [inside, floating, byElement]) m.widget.destroy();
  });

  test("a session token replaces the key and the site key", () => {
    const p = page();
    const config = resolveConfig({ ...PUBLISHABLE, sessionToken: "inf_wcs_x" }, p.document, SCRIPT_URL);
    expect(config.credential).toEqual({ kind: "single-token", token: "inf_wcs_x" });
    const fn = () => "inf_wcs_y";
    expect(resolveConfig({ getSessionToken: fn }, p.document, SCRIPT_URL).credential).toEqual({
      kind: "token-source",
      get: fn,
    });
  });
});

describe("configuration mistakes", () => {
  test("no credential, a key without site key, an unknown target: a clear error that never repeats the key", () => {
    const p = page();
    expect(() => resolveConfig({}, p.document, SCRIPT_URL)).toThrow(/key and captchaSiteKey/);
    let message = "";
    try {
      resolveConfig({ key: PUBLISHABLE.key }, p.document, SCRIPT_URL);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain("captchaSiteKey");
    expect(message).not.toContain(PUBLISHABLE.key);
    expect(() => resolveConfig({ ...PUBLISHABLE, target: "#nowhere" }, p.document, SCRIPT_URL)).toThrow(
      /#nowhere/,
    );
  });
});
