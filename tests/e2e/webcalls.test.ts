import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { waitUntil } from "../helpers/wait.ts";
import {
  ADMIN_TOKEN,
  axeViolations,
  cspViolations,
  ensureScreenshotDir,
  openPage,
  type PageServer,
  pageHtml,
  type Recorded,
  SCREENSHOTS,
  type Service,
  sinceClick,
  startPageServer,
  startService,
  startServiceAndBrowser,
  states,
  waitForState,
  widgetButton,
} from "./support.ts";

/**
 * Calls through POST /api/v1/web-calls in headless Chromium, against the real service: a simulated call
 * with a test session token minted through the API, from click to in-call to idle; the spent token;
 * each server refusal shown as its state; the /demo page.
 *
 * The service allows 6 web-call requests per 10 minutes per visitor address, and every page here is the
 * same visitor (127.0.0.1). The first service takes exactly 6 (the tests run in order); the /demo page
 * and the rate limit run on a second service, whose last test counts the requests made before it and
 * shows that the 7th is refused `rate_limited`.
 */

let service: Service;
let pages: PageServer;
let browser: Browser;
const open: Recorded[] = [];
/** POST /web-calls requests of the closed pages, per service origin (for the rate limit). */
const callsTo = new Map<string, number>();

beforeAll(async () => {
  ({ service, browser } = await startServiceAndBrowser());
  pages = startPageServer(service.url);
  ensureScreenshotDir();
});

afterEach(async () => {
  for (const r of open.splice(0)) {
    for (const u of r.calls) callsTo.set(new URL(u).origin, (callsTo.get(new URL(u).origin) ?? 0) + 1);
    expect(await cspViolations(r.page)).toEqual([]);
    await r.close();
  }
});

afterAll(async () => {
  await browser?.close();
  await pages?.stop();
  await service?.stop();
});

async function visit(url: string) {
  const r = await openPage(browser);
  open.push(r);
  await r.page.clock.install();
  await r.page.goto(url);
  await widgetButton(r.page).waitFor();
  return r;
}

function tokenPageUrl(token: string, lang = "en"): string {
  return pages.page(
    `/token-${crypto.randomUUID()}.html`,
    pageHtml({
      lang,
      tags: `<script src="${service.url}/widget/v1.js" data-session-token="${token}" data-target="#slot"></script>`,
    }),
  );
}

/** The answers of POST /web-calls seen by the page. */
function callAnswers(r: Recorded): Promise<unknown>[] {
  const answers: Promise<unknown>[] = [];
  r.page.on("response", (res) => {
    if (res.request().method() === "POST" && res.url().endsWith("/api/v1/web-calls")) {
      answers.push(res.json().then((body) => ({ status: res.status(), body })));
    }
  });
  return answers;
}

describe("a simulated call", () => {
  test("click → connecting → in-call → idle at the end of the call; the token is spent", async () => {
    const token = await service.mintToken();
    const r = await visit(tokenPageUrl(token));
    const { page } = r;
    const answers = callAnswers(r);
    expect(await page.evaluate(() => document.documentElement.outerHTML)).not.toContain(token);

    await widgetButton(page).click();
    await waitForState(page, "in-call");
    expect((await states(page)).map((s) => s.state)).toEqual(["connecting", "in-call"]);
    const figures = {
      connectingMs: await sinceClick(page, "connecting"),
      inCallMs: await sinceClick(page, "in-call"),
    };
    console.log(
      `click → connecting ${figures.connectingMs.toFixed(1)} ms, → in-call ${figures.inCallMs.toFixed(1)} ms`,
    );
    expect(await widgetButton(page).textContent()).toBe("End the call");
    expect(await page.locator("service-widget").locator("[role=status]").textContent()).toBe(
      "Call in progress. Your microphone is on.",
    );
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: join(SCREENSHOTS, "in-call-en.png") });

    expect(r.calls).toHaveLength(1);
    expect(answers).toHaveLength(1);
    const answer = (await answers[0]) as { status: number; body: Record<string, unknown> };
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({ simulated: true, livemode: false });
    const callId = answer.body.callId as string;
    const call = await service.api(`/api/v1/calls/${callId}`, { key: service.demo.testSecretKey });
    expect(call.status).toBe(200);
    expect(await call.json()).toMatchObject({ id: callId, livemode: false });
    // On the server the call plays as a simulated call (SIMULATION_TIME_SCALE=0.02: within seconds).
    await waitUntil(
      "the simulated call to complete",
      async () => {
        const res = await service.api(`/api/v1/calls/${callId}`, { key: service.demo.testSecretKey });
        return ((await res.json()) as { status: string }).status === "completed";
      },
      { timeoutMs: 30_000, stepMs: 100 },
    );

    // The widget shows a simulated call for about a minute, then returns to idle by itself.
    await page.clock.runFor(61_000);
    await waitForState(page, "idle");
    expect(await widgetButton(page).textContent()).toBe("Talk to the agent");

    // The attribute's token has served its call: a new click is refused at once, without a request.
    await widgetButton(page).click();
    await waitForState(page, "error", "invalid_session_token");
    expect(r.calls).toHaveLength(1);
  });

  test("keyboard only, in French: agent unavailable, the same token works on retry, Escape ends", async () => {
    const setActive = async (active: boolean) => {
      const res = await service.api(`/api/admin/v1/agents/${service.demo.agentId}`, {
        method: "PATCH",
        key: ADMIN_TOKEN,
        json: { active },
      });
      expect(res.status).toBe(200);
    };
    const r = await visit(tokenPageUrl(await service.mintToken(), "fr"));
    const { page } = r;
    await setActive(false);
    try {
      await page.keyboard.press("Tab");
      await page.keyboard.press("Enter");
      await waitForState(page, "error", "agent_unavailable");
      expect(await widgetButton(page).textContent()).toBe("Réessayer");
    } finally {
      await setActive(true);
    }
    // A refusal leaves the token valid, and the widget keeps it for the next try.
    await page.keyboard.press("Enter");
    await waitForState(page, "in-call");
    expect(await widgetButton(page).textContent()).toBe("Raccrocher");
    expect(await page.locator("service-widget").locator("[role=status]").textContent()).toBe(
      "Appel en cours. Votre micro est activé.",
    );
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: join(SCREENSHOTS, "in-call-fr.png") });
    await page.keyboard.press("Escape");
    await waitForState(page, "idle");
    expect(await widgetButton(page).textContent()).toBe("Parler à l'agent");
    expect((await states(page)).map((s) => (s.error ? `${s.state}:${s.error}` : s.state))).toEqual([
      "connecting",
      "error:agent_unavailable",
      "connecting",
      "in-call",
      "idle",
    ]);
    expect(r.calls).toHaveLength(2);
  });
});

describe("server refusals, each shown as its state", () => {
  test("a wrong session token → invalid_session_token", async () => {
    const r = await visit(tokenPageUrl("inf_wcs_ThisTokenWasNeverMintedByTheService0000000"));
    await widgetButton(r.page).click();
    await waitForState(r.page, "error", "invalid_session_token");
    expect(r.calls).toHaveLength(1);
    const alert = await r.page.locator("service-widget").locator("[role=alert]").textContent();
    expect(alert).not.toContain("invalid_session_token");
    expect(alert?.length).toBeGreaterThan(10);
  });

  async function publishablePage(key: string) {
    const name = crypto.randomUUID();
    pages.script(
      `/${name}.js`,
      `ServiceWidget.init({ target: "#slot", key: ${JSON.stringify(key)}, captchaSiteKey: "site-key-e2e",
  captchaScriptUrl: location.origin + "/captcha/api.js" });`,
    );
    return visit(
      pages.page(
        `/${name}.html`,
        pageHtml({
          tags: `<script src="${service.url}/widget/v1.js"></script>\n<script src="/${name}.js"></script>`,
        }),
      ),
    );
  }

  test("a publishable key used from a website not in its list → origin_not_allowed", async () => {
    const res = await service.api(
      `/api/admin/v1/organizations/${service.demo.organizationId}/publishable-keys`,
      {
        key: ADMIN_TOKEN,
        json: {
          agentId: service.demo.agentId,
          allowedOrigins: ["https://shop.example.com"],
          monthlyMinuteCap: 30,
        },
      },
    );
    expect(res.status).toBe(201);
    const { key } = (await res.json()) as { key: string };
    const r = await publishablePage(key);
    await widgetButton(r.page).click();
    await waitForState(r.page, "error", "origin_not_allowed");
    expect(r.calls).toHaveLength(1);
    // The bot check ran (action web_call) before the request; the key never entered the page.
    expect(
      await r.page.evaluate(() => (window as unknown as { __captchaCalls: unknown[] }).__captchaCalls),
    ).toEqual([{ siteKey: "site-key-e2e", action: "web_call" }]);
    expect(await r.page.evaluate(() => document.documentElement.outerHTML)).not.toContain(key);
  });

  test("an unknown publishable key → invalid_key", async () => {
    const r = await publishablePage("inf_pub_ThisKeyDoesNotExist000000000000000000000");
    await widgetButton(r.page).click();
    await waitForState(r.page, "error", "invalid_key");
    expect(r.calls).toHaveLength(1);
  });
});

describe("a second service (a fresh rate-limit window): the demo page, then the rate limit", () => {
  let second: Service;
  let secondPages: PageServer;
  beforeAll(async () => {
    second = await startService();
    secondPages = startPageServer(second.url);
  });
  afterAll(async () => {
    await secondPages?.stop();
    await second?.stop();
  });

  test("/demo plays a simulated call under its strict CSP, and removes the token from the page", async () => {
    const r = await visit(`${second.url}/demo`);
    const { page } = r;
    const left = await page.evaluate(() => ({
      attribute: document.querySelector("script[src='/widget/v1.js']")?.hasAttribute("data-session-token"),
      html: document.documentElement.outerHTML,
    }));
    expect(left.attribute).toBe(false);
    expect(left.html).not.toMatch(/inf_wcs_/);
    await widgetButton(page).click();
    await waitForState(page, "in-call");
    await page.screenshot({ path: join(SCREENSHOTS, "demo-in-call-en.png"), fullPage: true });
    await widgetButton(page).click();
    await waitForState(page, "idle");
    expect((await states(page)).map((s) => s.state)).toEqual(["connecting", "in-call", "idle"]);
    expect(r.calls).toHaveLength(1);
  });

  test("the 7th web-call request from one visitor address within 10 minutes → rate_limited", async () => {
    const before = callsTo.get(second.url) ?? 0;
    expect(before).toBe(1);
    // A token source that always gives a token the service never minted: each try is one request.
    secondPages.script(
      "/always-wrong.js",
      `ServiceWidget.init({ target: "#slot", getSessionToken: function () {
  return "inf_wcs_ThisTokenWasNeverMintedByTheService0000000"; } });`,
    );
    const r = await visit(
      secondPages.page(
        "/always-wrong.html",
        pageHtml({
          tags: `<script src="${second.url}/widget/v1.js"></script>\n<script src="/always-wrong.js"></script>`,
        }),
      ),
    );
    const button = widgetButton(r.page);
    for (let n = before; n < 6; n++) {
      await button.click();
      await r.page.waitForFunction(
        (count) => (window as unknown as { __states: unknown[] }).__states.length >= count,
        (n - before + 1) * 2,
      );
      await waitForState(r.page, "error", "invalid_session_token");
    }
    expect(before + r.calls.length).toBe(6);
    await button.click();
    await waitForState(r.page, "error", "rate_limited");
    expect(before + r.calls.length).toBe(7);
    const alert = await r.page.locator("service-widget").locator("[role=alert]").textContent();
    expect(alert).not.toContain("rate_limited");
  });
});
