import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { waitUntil } from "../helpers/wait.ts";
import {
  axeViolations,
  cspViolations,
  ensureScreenshotDir,
  openPage,
  type PageServer,
  pageHtml,
  type Recorded,
  SCREENSHOTS,
  type Service,
  startPageServer,
  startServiceAndBrowser,
  states,
  waitForState,
  webCallRequests,
  widgetButton,
} from "./support.ts";

/**
 * The widget in headless Chromium, served by the real service, on pages under a strict CSP: what it
 * requests and when, keyboard use, the blocked microphone, reduced motion, accessibility (axe-core),
 * and a screenshot of each state in both languages. Calls that reach POST /web-calls are in
 * webcalls.test.ts.
 */

let service: Service;
let pages: PageServer;
let browser: Browser;
const open: Recorded[] = [];

beforeAll(async () => {
  ({ service, browser } = await startServiceAndBrowser());
  pages = startPageServer(service.url);
  ensureScreenshotDir();
  // A page whose widget waits, in `connecting`, for a token the test hands over (window.__release).
  pages.script(
    "/held.js",
    `window.__widget = ServiceWidget.init({
  target: "#slot",
  getSessionToken: function () { return new Promise(function (r) { window.__release = r; }); }
});`,
  );
  for (const lang of ["en", "fr"]) {
    pages.page(
      `/held-${lang}.html`,
      pageHtml({
        lang,
        tags: `<script src="${service.url}/widget/v1.js"></script>\n<script src="/held.js"></script>`,
      }),
    );
  }
});

afterEach(async () => {
  for (const r of open.splice(0)) {
    // Every page of this file runs under a strict CSP: nothing the widget did may have been refused.
    expect(await cspViolations(r.page)).toEqual([]);
    expect(r.errors.filter((e) => /Content Security Policy|Refused to/i.test(e))).toEqual([]);
    await r.close();
  }
});

afterAll(async () => {
  await browser?.close();
  await pages?.stop();
  await service?.stop();
});

async function tokenPage(lang = "en", opts: { microphone?: boolean } = {}) {
  const token = await service.mintToken();
  const url = pages.page(
    `/token-${crypto.randomUUID()}.html`,
    pageHtml({
      lang,
      tags: `<script src="${service.url}/widget/v1.js" data-session-token="${token}" data-target="#slot"></script>`,
    }),
  );
  const r = await openPage(browser, opts);
  open.push(r);
  await r.page.goto(url);
  await widgetButton(r.page).waitFor();
  return { ...r, token };
}

async function heldPage(lang = "en") {
  const r = await openPage(browser);
  open.push(r);
  await r.page.goto(`${pages.origin}/held-${lang}.html`);
  await widgetButton(r.page).waitFor();
  return r;
}

function shadowActive(page: Page) {
  return page.evaluate(() => {
    const host = document.activeElement;
    return { host: host?.tagName, inner: host?.shadowRoot?.activeElement?.tagName ?? null };
  });
}

describe("before the first interaction", () => {
  test("a token page requests only the widget script, and the token attribute is gone at once", async () => {
    const { page, requests, token } = await tokenPage();
    const fromService = requests.filter((u) => u.startsWith(service.url));
    expect(fromService).toEqual([`${service.url}/widget/v1.js`]);
    const left = await page.evaluate(() => ({
      attribute: document.querySelector("script[src$='/widget/v1.js']")?.hasAttribute("data-session-token"),
      html: document.documentElement.outerHTML,
    }));
    expect(left.attribute).toBe(false);
    expect(left.html).not.toContain(token);
    expect(await states(page)).toEqual([]);
    // The focus asks for nothing (a token page has no bot check to warm up); the media client is
    // loaded by the first click (here Enter), with the call request.
    await page.keyboard.press("Tab");
    expect((await shadowActive(page)).inner).toBe("BUTTON");
    await Bun.sleep(300);
    expect(requests.filter((u) => u.startsWith(service.url))).toEqual([`${service.url}/widget/v1.js`]);
    await page.keyboard.press("Enter");
    await waitUntil(
      "the request for media.js",
      () => requests.includes(`${service.url}/widget/v1/media.js`),
      { timeoutMs: 20_000 },
    );
    await waitUntil("the call request", () => webCallRequests(requests, service.url).length === 1, {
      timeoutMs: 20_000,
    });
  });

  test("a publishable-key page loads the bot check script only on the first pointer-enter, not the media client; destroy() takes it away", async () => {
    pages.script(
      "/publishable.js",
      `window.__pub = ServiceWidget.init({ target: "#slot", key: "inf_pub_e2e_not_a_real_key", captchaSiteKey: "site-key-e2e",
  captchaScriptUrl: location.origin + "/captcha/api.js" });`,
    );
    const url = pages.page(
      "/publishable.html",
      pageHtml({
        tags: `<script src="${service.url}/widget/v1.js"></script>\n<script src="/publishable.js"></script>`,
      }),
    );
    const r = await openPage(browser);
    open.push(r);
    await r.page.goto(url);
    await widgetButton(r.page).waitFor();
    const afterLoad = [...r.requests];
    expect(afterLoad.filter((u) => u.startsWith(service.url))).toEqual([`${service.url}/widget/v1.js`]);
    expect(afterLoad.some((u) => u.includes("/captcha/api.js"))).toBe(false);
    await widgetButton(r.page).hover();
    await waitUntil(
      "the request for the bot check's api.js",
      () => r.requests.includes(`${pages.origin}/captcha/api.js?render=site-key-e2e`),
      { timeoutMs: 20_000 },
    );
    // The media client waits for the click.
    await Bun.sleep(300);
    expect(r.requests.filter((u) => u.startsWith(service.url))).toEqual([`${service.url}/widget/v1.js`]);
    const added = () =>
      r.page.evaluate(
        () => document.querySelectorAll('service-widget, script[src*="/captcha/api.js"]').length,
      );
    expect(await added()).toBe(2);
    await r.page.evaluate(() => (window as unknown as { __pub: { destroy(): void } }).__pub.destroy());
    expect(await r.page.evaluate(() => document.querySelectorAll("service-widget").length)).toBe(0);
    // The script goes once its load has settled (a script removed mid-load could still run later).
    await waitUntil("the bot check script taken away", async () => (await added()) === 0, {
      timeoutMs: 20_000,
    });
  });
});

describe("keyboard", () => {
  test("Tab reaches the button with a visible focus ring; Enter and Space start, Escape ends", async () => {
    const { page } = await heldPage();
    await page.keyboard.press("Tab");
    expect(await shadowActive(page)).toEqual({ host: "SERVICE-WIDGET", inner: "BUTTON" });
    const ring = await widgetButton(page).evaluate((b) => {
      const s = getComputedStyle(b);
      return { style: s.outlineStyle, width: s.outlineWidth, focusVisible: b.matches(":focus-visible") };
    });
    expect(ring).toEqual({ style: "solid", width: "3px", focusVisible: true });

    await page.keyboard.press("Enter");
    await waitForState(page, "connecting");
    const button = widgetButton(page);
    expect(await button.getAttribute("aria-disabled")).toBe("true");
    expect(await shadowActive(page)).toEqual({ host: "SERVICE-WIDGET", inner: "BUTTON" });
    // Inactive while connecting: a second Enter starts nothing new.
    await page.keyboard.press("Enter");
    await page.keyboard.press("Escape");
    await waitForState(page, "idle");
    expect(await button.getAttribute("aria-disabled")).toBeNull();

    await page.keyboard.press(" ");
    await waitForState(page, "connecting");
    // Escape works wherever the focus is on the page.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    expect((await shadowActive(page)).host).toBe("BODY");
    await page.keyboard.press("Escape");
    await waitForState(page, "idle");
    expect((await states(page)).map((s) => s.state)).toEqual(["connecting", "idle", "connecting", "idle"]);
  });
});

describe("refusals before any request", () => {
  test("a blocked microphone: error microphone_blocked, an alert, and no request to /web-calls", async () => {
    const { page, requests } = await tokenPage("en", { microphone: false });
    await widgetButton(page).click();
    await waitForState(page, "error", "microphone_blocked");
    expect(webCallRequests(requests, service.url)).toEqual([]);
    const alert = page.locator("service-widget").locator("[role=alert]");
    expect((await alert.textContent())?.toLowerCase()).toContain("microphone");
    expect(await alert.textContent()).not.toContain("microphone_blocked");
    expect(await widgetButton(page).textContent()).toBe("Try again");
  });
});

describe("a room that cannot be joined", () => {
  test("the media connection fails: error media_error with its alert, not a silent return to idle", async () => {
    const { page } = await tokenPage();
    // A live answer whose room is on a server that speaks no LiveKit signalling (the service itself:
    // its WebSocket upgrade is refused), so the real media client fails to connect.
    await page.route(`${service.url}/api/v1/web-calls`, (route) =>
      route.fulfill({
        status: 201,
        contentType: "application/json",
        headers: { "access-control-allow-origin": pages.origin },
        body: JSON.stringify({
          callId: "call_01JZ0000000000000000000000",
          livemode: true,
          maxSeconds: 600,
          room: {
            name: "call_01JZ0000000000000000000000",
            serverUrl: service.url.replace(/^http/, "ws"),
            participantToken: "e2e.participant.token",
          },
        }),
      }),
    );
    await widgetButton(page).click();
    await waitForState(page, "error", "media_error", 30_000);
    expect((await states(page)).map((s) => s.state)).toEqual(["connecting", "error"]);
    const alert = page.locator("service-widget").locator("[role=alert]");
    expect(await alert.textContent()).toBeTruthy();
    expect(await alert.textContent()).not.toContain("media_error");
    expect(await widgetButton(page).textContent()).toBe("Try again");
  }, 60_000);
});

describe("motion", () => {
  async function dotAnimation(page: Page) {
    return page
      .locator("service-widget")
      .locator(".dot")
      .evaluate((d) => getComputedStyle(d).animationName);
  }

  test("the call indicator pulses, and stops when the visitor prefers reduced motion", async () => {
    const { page } = await heldPage();
    await widgetButton(page).click();
    await waitForState(page, "connecting");
    expect(await dotAnimation(page)).not.toBe("none");
    await page.emulateMedia({ reducedMotion: "reduce" });
    expect(await dotAnimation(page)).toBe("none");
    await page.emulateMedia({ reducedMotion: "no-preference" });
    expect(await dotAnimation(page)).not.toBe("none");
  });
});

describe("accessibility and screenshots", () => {
  for (const lang of ["en", "fr"] as const) {
    test(`axe-core finds no violation in idle, connecting and error (${lang}); screenshots`, async () => {
      const { page } = await heldPage(lang);
      const shot = (state: string) => page.screenshot({ path: join(SCREENSHOTS, `${state}-${lang}.png`) });
      expect(await axeViolations(page)).toEqual([]);
      await shot("idle");
      await widgetButton(page).click();
      await waitForState(page, "connecting");
      await page.mouse.move(0, 0);
      expect(await axeViolations(page)).toEqual([]);
      await shot("connecting");
      // A token source answering nothing usable: the error state, announced as an alert.
      await page.evaluate(() => (window as unknown as { __release: (t: string) => void }).__release(""));
      await waitForState(page, "error", "invalid_session_token");
      expect(await axeViolations(page)).toEqual([]);
      await shot("error");
      const button = await widgetButton(page).textContent();
      expect(button).toBe(lang === "fr" ? "Réessayer" : "Try again");
    });
  }

  test("a floating widget (no target) on a page with landmarks: no violation either", async () => {
    const token = await service.mintToken();
    const url = pages.page(
      "/floating.html",
      pageHtml({ tags: `<script src="${service.url}/widget/v1.js" data-session-token="${token}"></script>` }),
    );
    const r = await openPage(browser);
    open.push(r);
    await r.page.goto(url);
    await widgetButton(r.page).waitFor();
    expect(await axeViolations(r.page)).toEqual([]);
  });

  test("the checks can fail: axe sees into a shadow root, the recorder sees a CSP violation", async () => {
    const url = pages.page(
      "/broken.html",
      pageHtml({ tags: '<div id="broken"></div><script>document.title = "inline";</script>' }),
    );
    const r = await openPage(browser);
    await r.page.goto(url);
    await r.page.evaluate(() => {
      const root = document.getElementById("broken")!.attachShadow({ mode: "open" });
      root.appendChild(document.createElement("button"));
    });
    expect((await axeViolations(r.page)).map((v) => v.id)).toContain("button-name");
    expect(await cspViolations(r.page)).toMatchObject([{ directive: "script-src-elem" }]);
    await r.close();
  });
});
