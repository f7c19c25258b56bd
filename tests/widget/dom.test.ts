import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { TEXTS } from "../../widget/src/i18n.ts";
import { CSS } from "../../widget/src/styles.ts";
import { API_ERROR_CODES, type WidgetErrorCode } from "../../widget/src/types.ts";
import {
  apiError,
  FakeBrowser,
  flush,
  json,
  liveAnswer,
  type Mounted,
  mount,
  openPage,
  PUBLISHABLE,
} from "./harness.ts";

const open: Mounted[] = [];
function track(m: Mounted) {
  open.push(m);
  return m;
}
afterEach(async () => {
  for (const m of open.splice(0)) {
    m.widget.destroy();
    await m.page.close();
  }
});

const TOKEN = "inf_wcs_9hG2kL5pQ8rT1vX4zB7nM0cF";

function keydown(target: EventTarget, key: string, win: { KeyboardEvent: typeof KeyboardEvent }) {
  target.dispatchEvent(new win.KeyboardEvent("keydown", { key, bubbles: true, composed: true }));
}

describe("texts and announcements", () => {
  for (const lang of ["en", "fr"] as const) {
    const t = TEXTS[lang];
    test(`${lang}: button text and polite announcement of every state`, async () => {
      const browser = new FakeBrowser();
      let answer!: () => void;
      browser.answer = () => new Promise((resolve) => (answer = () => resolve(json(201, liveAnswer()))));
      const m = track(mount(PUBLISHABLE, { page: openPage({ lang }), browser }));
      expect(m.button().textContent).toBe(t.label);
      expect(m.status().getAttribute("aria-live")).toBe("polite");
      expect(m.status().textContent).toBe("");
      expect(m.alert().textContent).toBe("");

      const starting = m.widget.start();
      await flush();
      expect(m.button().textContent).toBe(t.connecting);
      expect(m.status().textContent).toBe(t.announceConnecting);
      answer();
      await starting;
      expect(m.button().textContent).toBe(t.inCall);
      expect(m.status().textContent).toBe(t.announceInCall);
      expect(m.shadow().querySelector(".w")!.classList.contains("in-call")).toBe(true);

      await m.widget.stop();
      expect(m.button().textContent).toBe(t.label);
      expect(m.status().textContent).toBe(t.label);
    });

    test(`${lang}: an error is a readable alert and the button offers a retry, never a code`, async () => {
      const browser = new FakeBrowser();
      browser.answer = () => apiError(429, "rate_limited");
      const m = track(mount(PUBLISHABLE, { page: openPage({ lang }), browser }));
      await m.widget.start();
      expect(m.button().textContent).toBe(t.retry);
      expect(m.alert().getAttribute("role")).toBe("alert");
      expect(m.alert().textContent).toBe(t.errors.rate_limited);
      expect(m.shadow().innerHTML).not.toContain("rate_limited");
    });
  }

  test("the button labels and screen-reader announcements in English and French, word for word", () => {
    expect(TEXTS.en).toMatchObject({
      label: "Talk to the agent",
      connecting: "Connecting…",
      inCall: "End the call",
      retry: "Try again",
      announceConnecting: "Connecting to the agent. Allow the microphone if your browser asks.",
      announceInCall: "Call in progress. Your microphone is on.",
    });
    expect(TEXTS.fr).toMatchObject({
      label: "Parler à l'agent",
      connecting: "Connexion…",
      inCall: "Raccrocher",
      retry: "Réessayer",
      announceConnecting: "Connexion à l'agent. Autorisez le micro si votre navigateur le demande.",
      announceInCall: "Appel en cours. Votre micro est activé.",
    });
  });

  test("every error code has a sentence in both languages, none showing a code", () => {
    const codes: WidgetErrorCode[] = [
      ...API_ERROR_CODES,
      "microphone_blocked",
      "microphone_unavailable",
      "network_error",
      "media_error",
      "unknown",
    ];
    for (const lang of ["en", "fr"] as const) {
      expect(Object.keys(TEXTS[lang].errors).sort()).toEqual([...codes].sort());
      for (const code of codes) {
        const text = TEXTS[lang].errors[code];
        expect(text.length).toBeGreaterThan(10);
        expect(text).not.toMatch(/_|\d{3}/);
      }
    }
    expect(TEXTS.fr.errors.microphone_blocked).not.toBe(TEXTS.en.errors.microphone_blocked);
  });
});

describe("the button", () => {
  test("is a real button reachable by Tab: type=button, not disabled, no negative tabindex", () => {
    const m = track(mount(PUBLISHABLE));
    const button = m.button();
    expect(button.tagName).toBe("BUTTON");
    expect(button.getAttribute("type")).toBe("button");
    expect(button.disabled).toBe(false);
    expect(button.hasAttribute("tabindex")).toBe(false);
    button.focus();
    expect(m.shadow().activeElement).toBe(button);
  });

  test("click starts a call, click again ends it (Enter and Space activate a button by clicking it)", async () => {
    const m = track(mount({ sessionToken: TOKEN }));
    m.button().click();
    await flush();
    expect(m.widget.getState()).toBe("in-call");
    m.button().click();
    await flush();
    expect(m.widget.getState()).toBe("idle");
    expect(m.browser.streams[0]!.tracks[0]!.stopped).toBe(true);
  });

  test("while connecting: aria-disabled=true, still focusable, clicks ignored", async () => {
    const browser = new FakeBrowser();
    let answer!: () => void;
    browser.answer = () => new Promise((resolve) => (answer = () => resolve(json(201, liveAnswer()))));
    const m = track(mount(PUBLISHABLE, { browser }));
    m.button().focus();
    m.button().click();
    await flush();
    expect(m.button().getAttribute("aria-disabled")).toBe("true");
    expect(m.button().disabled).toBe(false);
    expect(m.shadow().activeElement).toBe(m.button());
    m.button().click();
    await flush();
    expect(browser.requests).toHaveLength(1);
    answer();
    await flush();
    expect(m.button().hasAttribute("aria-disabled")).toBe(false);
  });

  test("Escape ends a call wherever the focus is on the page; at idle it does nothing", async () => {
    const page = openPage({ body: '<input id="search">' });
    const m = track(mount({ sessionToken: TOKEN }, { page }));
    const input = page.document.getElementById("search")!;
    keydown(input, "Escape", page.window as never);
    expect(m.changes).toHaveLength(0);
    await m.widget.start();
    input.focus();
    keydown(input, "Enter", page.window as never);
    expect(m.widget.getState()).toBe("in-call");
    keydown(input, "Escape", page.window as never);
    await flush();
    expect(m.widget.getState()).toBe("idle");
    expect(m.browser.streams[0]!.tracks[0]!.stopped).toBe(true);
  });

  test("Escape ends the call even where the page stops the event's propagation", async () => {
    const page = openPage({ body: '<input id="combo">' });
    const m = track(mount({ sessionToken: TOKEN }, { page }));
    const input = page.document.getElementById("combo")!;
    input.addEventListener("keydown", (e) => e.stopPropagation());
    await m.widget.start();
    // An Escape that ends an input method's composition is not a hang-up.
    input.dispatchEvent(
      new (page.window as never as typeof globalThis).KeyboardEvent("keydown", {
        key: "Escape",
        isComposing: true,
        bubbles: true,
      }),
    );
    await flush();
    expect(m.widget.getState()).toBe("in-call");
    keydown(input, "Escape", page.window as never);
    await flush();
    expect(m.widget.getState()).toBe("idle");
  });

  test("Escape from inside the widget ends the call too", async () => {
    const m = track(mount({ sessionToken: TOKEN }));
    await m.widget.start();
    keydown(m.button(), "Escape", m.page.window as never);
    await flush();
    expect(m.widget.getState()).toBe("idle");
  });
});

describe("styles", () => {
  test("constructable stylesheet in an open shadow root: no <style> or style attribute anywhere", () => {
    const m = track(mount(PUBLISHABLE));
    expect(m.host().shadowRoot).not.toBeNull();
    expect(m.shadow().mode).toBe("open");
    expect(m.shadow().adoptedStyleSheets).toHaveLength(1);
    expect(m.shadow().querySelectorAll("style, [style]")).toHaveLength(0);
    expect(m.page.document.querySelectorAll("style, link, [style]")).toHaveLength(0);
  });

  test("page styles stop at the boundary, the focus ring is always drawn, the pulse stops for reduced motion", () => {
    // The host's declarations are !important: they win over the page's, even the page's !important.
    expect(CSS).toMatch(/:host\{all:initial!important;[^}]*direction:ltr!important/);
    expect(CSS).not.toMatch(/\d(em|rem)\b/);
    expect(CSS).toMatch(/button:focus[,{][^}]*outline:3px solid/);
    expect(CSS).not.toMatch(/outline:\s*(none|0)/);
    expect(CSS).toMatch(/@media \(prefers-reduced-motion:reduce\)\{\.dot\{animation:none!important\}\}/);
    // Every selector is scoped to the shadow root: nothing targets html, body or the page (a `*` in a
    // shadow root's stylesheet matches the elements of that shadow tree only).
    expect(CSS).not.toMatch(/(^|[},])\s*(html|body)\s*[{,]/);
  });

  test("text and background colours have a contrast of at least 4.5:1", () => {
    const rule = (selector: string) => {
      const match = CSS.match(new RegExp(`(?:^|\\n)${selector.replace(/[.*]/g, "\\$&")}\\{([^}]*)\\}`));
      expect(match).not.toBeNull();
      return match![1]!;
    };
    const bg = (css: string) => css.match(/background:(#[0-9a-f]{6})/)![1]!;
    const white = "#ffffff";
    for (const selector of [
      "button",
      "button:hover",
      ".connecting button",
      ".in-call button",
      ".in-call button:hover",
    ]) {
      expect(contrast(bg(rule(selector)), white)).toBeGreaterThanOrEqual(4.5);
    }
    const alert = rule(".alert");
    expect(alert).toContain("background:#fff;");
    expect(contrast(alert.match(/;color:(#[0-9a-f]{6})/)![1]!, white)).toBeGreaterThanOrEqual(4.5);
  });
});

describe("nothing before interaction, then prefetch", () => {
  test("mounting requests nothing; pointer-enter or focus prefetches the bot check once; the media client loads on the first click", async () => {
    const m = track(mount(PUBLISHABLE));
    expect(m.browser.requests).toHaveLength(0);
    expect(m.browser.mediaLoads).toHaveLength(0);
    expect(m.browser.captchaLoads).toHaveLength(0);
    expect(m.browser.streams).toHaveLength(0);
    m.button().dispatchEvent(new m.page.window.PointerEvent("pointerenter") as unknown as Event);
    m.button().focus();
    await flush();
    expect(m.browser.captchaLoads).toEqual([
      { scriptUrl: "https://www.google.com/recaptcha/api.js", siteKey: PUBLISHABLE.captchaSiteKey },
    ]);
    expect(m.browser.mediaLoads).toHaveLength(0);
    expect(m.browser.requests).toHaveLength(0);
    m.button().click();
    await flush();
    expect(m.browser.mediaLoads).toEqual(["https://voice.example.net/widget/v1/media.js"]);
  });

  test("with a session token the bot check is never loaded", async () => {
    const m = track(mount({ sessionToken: TOKEN }));
    m.button().focus();
    await m.widget.start();
    expect(m.browser.captchaLoads).toHaveLength(0);
    expect(m.browser.captchaExecutions).toHaveLength(0);
  });
});

describe("secrets", () => {
  test("the key and the tokens never reach the page, the console or the events", async () => {
    const calls: unknown[][] = [];
    const spies = (["log", "info", "warn", "error", "debug"] as const).map((method) =>
      spyOn(console, method).mockImplementation((...args: unknown[]) => {
        calls.push(args);
      }),
    );
    try {
      const browser = new FakeBrowser();
      browser.answer = () => json(201, liveAnswer());
      const page = openPage({ lang: "fr" });
      const a = track(mount(PUBLISHABLE, { page, browser }));
      await a.widget.start();
      const b = track(mount({ getSessionToken: () => TOKEN }, { page, browser }));
      browser.answer = () => apiError(401, "invalid_session_token");
      await b.widget.start();
      const html = [page.document.documentElement.outerHTML, a.shadow().innerHTML, b.shadow().innerHTML].join(
        "\n",
      );
      const events = JSON.stringify([a.events, b.events].flat().map((e) => e.detail));
      for (const secret of [PUBLISHABLE.key, TOKEN, "eyJ.participant.token", "captcha-token-for"]) {
        expect(html).not.toContain(secret);
        expect(events).not.toContain(secret);
        expect(JSON.stringify(calls)).not.toContain(secret);
      }
      expect(calls).toHaveLength(0);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });
});

describe("destroy", () => {
  test("ends the call and removes the element, the listeners and the styles", async () => {
    const page = openPage();
    const doc = page.document;
    // Every listener the widget puts on the page must be taken off again.
    const listening = new Set<unknown>();
    for (const target of [doc, page.window as unknown as EventTarget]) {
      const add = target.addEventListener.bind(target);
      const remove = target.removeEventListener.bind(target);
      target.addEventListener = ((type: string, fn: EventListener, o?: AddEventListenerOptions) => {
        listening.add(fn);
        add(type, fn, o);
      }) as typeof target.addEventListener;
      target.removeEventListener = ((type: string, fn: EventListener, o?: EventListenerOptions) => {
        listening.delete(fn);
        remove(type, fn, o);
      }) as typeof target.removeEventListener;
    }
    const browser = new FakeBrowser();
    browser.answer = () => json(201, liveAnswer());
    const m = track(mount(PUBLISHABLE, { page, browser }));
    const shadow = m.shadow();
    await m.widget.start();
    m.widget.destroy();
    expect(doc.querySelectorAll("service-widget")).toHaveLength(0);
    expect(shadow.adoptedStyleSheets).toHaveLength(0);
    expect(shadow.childNodes).toHaveLength(0);
    expect(browser.leaves).toEqual([0]);
    expect(browser.streams[0]!.tracks[0]!.stopped).toBe(true);
    expect(m.widget.getState()).toBe("idle");
    // The harness itself listens for service:statechange; the widget's own listeners are gone.
    expect(listening.size).toBe(1);
    // The bot check's script is given back (it goes when no other widget of the page uses it).
    expect(browser.captchaReleases).toEqual([m.host()]);
    expect(await m.widget.start()).toEqual({ state: "idle" });
    expect(browser.requests).toHaveLength(1);
    m.widget.destroy();
  });

  test("destroy while connecting settles start() and ignores the late answer", async () => {
    const browser = new FakeBrowser();
    let answer!: () => void;
    browser.answer = () => new Promise((resolve) => (answer = () => resolve(json(201, liveAnswer()))));
    const m = track(mount(PUBLISHABLE, { browser }));
    const starting = m.widget.start();
    await flush();
    m.widget.destroy();
    expect(await starting).toEqual({ state: "idle" });
    answer();
    await flush();
    expect(browser.joins).toHaveLength(0);
    expect(browser.streams[0]!.tracks[0]!.stopped).toBe(true);
  });
});

/** WCAG 2 contrast ratio of two #rrggbb colours. */
function contrast(a: string, b: string): number {
  const lum = (hex: string) => {
    const [r, g, bl] = [1, 3, 5].map((i) => {
      const c = Number.parseInt(hex.slice(i, i + 2), 16) / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * bl!;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (hi! + 0.05) / (lo! + 0.05);
}
