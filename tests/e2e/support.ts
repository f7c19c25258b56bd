/**
 * End-to-end harness: the real service as a child process, a small local web server for the test
 * pages (each under a strict Content-Security-Policy), and headless Chromium driven by
 * playwright-core.
 *
 * The service runs on the database of the pass: a fresh PostgreSQL database, or (TEST_DATABASE=embedded)
 * the embedded database in a fresh DATA_DIR, so the demo is seeded exactly as on a first start.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import postgres from "postgres";
import { type ServiceProcess, spawnService, stopService } from "../db/serviceProcess.ts";
import { PG_ADMIN_URL, TEST_DATABASE } from "../helpers/db.ts";
import { type FakeCaptcha, startFakeCaptcha } from "../helpers/fakeCaptcha.ts";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const SCREENSHOTS = join(import.meta.dir, "..", "..", ".artifacts", "screenshots");
export const ADMIN_TOKEN = "e2e-admin-token-0123456789abcdefghijklmnop";

/**
 * No `--use-fake-ui-for-media-stream`: the microphone is then allowed per context (`permissions:
 * ["microphone"]`) and refused (NotAllowedError) in a context without that permission, as for a visitor
 * who blocked it. The fake device gives a real audio track.
 */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--use-fake-device-for-media-stream",
];

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    // Like a missing PostgreSQL: the suite needs it, so this fails rather than skips.
    throw new Error(
      `Chromium is required at ${CHROMIUM} for the end-to-end tests (apt-get install -y chromium, or set CHROMIUM_PATH).`,
    );
  }
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
}

// ---------------------------------------------------------------------------------------------
// The service

export interface Service {
  url: string;
  process: ServiceProcess;
  captcha: FakeCaptcha;
  demo: { organizationId: string; agentId: string; testSecretKey: string };
  /** Calls the service's API as a server-side integrator would. */
  api(path: string, init?: { method?: string; json?: unknown; key?: string }): Promise<Response>;
  /** A fresh test session token for the demo agent, minted through the API. */
  mintToken(): Promise<string>;
  stop(): Promise<void>;
}

export async function startService(env: Record<string, string> = {}): Promise<Service> {
  const dataDir = mkdtempSync(join(tmpdir(), "vs-e2e-"));
  const captcha = await startFakeCaptcha({ hostname: "127.0.0.1" });
  let dropDatabase: (() => Promise<void>) | null = null;
  const dbEnv: Record<string, string> = {};
  if (TEST_DATABASE === "postgres") {
    const name = `vs_e2e_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
    const admin = postgres(PG_ADMIN_URL, { max: 1, connect_timeout: 5, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    dbEnv.DATABASE_URL = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
    // The end-to-end runs use the demo organization, which a DATABASE_URL database gets only on request.
    dbEnv.DEMO = "true";
    dropDatabase = async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    };
  }
  const proc = spawnService(["serve"], {
    env: {
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      ADMIN_TOKEN,
      SIMULATION_TIME_SCALE: "0.02",
      ...captcha.env,
      ...dbEnv,
      ...env,
    },
  });
  let url: string;
  try {
    url = await proc.listening(60_000);
  } catch (err) {
    proc.proc.kill("SIGKILL");
    await captcha.close();
    await dropDatabase?.();
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const credentials = JSON.parse(readFileSync(join(dataDir, "demo-credentials.json"), "utf8"));
  const demo = {
    organizationId: credentials.organizationId as string,
    agentId: credentials.agentId as string,
    testSecretKey: credentials.secretKey.key as string,
  };
  const api: Service["api"] = (path, init = {}) => {
    const headers: Record<string, string> = {};
    if (init.key) headers.authorization = `Bearer ${init.key}`;
    if (init.json !== undefined) headers["content-type"] = "application/json";
    return fetch(`${url}${path}`, {
      method: init.method ?? (init.json === undefined ? "GET" : "POST"),
      headers,
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
    });
  };
  return {
    url,
    process: proc,
    captcha,
    demo,
    api,
    async mintToken() {
      const res = await api("/api/v1/web-call-sessions", {
        key: demo.testSecretKey,
        json: { agentId: demo.agentId },
      });
      if (res.status !== 201) throw new Error(`minting a session token: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { token: string }).token;
    },
    async stop() {
      await stopService(proc);
      await captcha.close();
      await dropDatabase?.();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Both at once (each takes a second or more); if either fails, the other is stopped before the error
 * is passed on, so no child process outlives a failed start.
 */
export async function startServiceAndBrowser(): Promise<{ service: Service; browser: Browser }> {
  const [service, browser] = await Promise.allSettled([startService(), launchBrowser()]);
  if (service.status === "fulfilled" && browser.status === "fulfilled") {
    return { service: service.value, browser: browser.value };
  }
  if (service.status === "fulfilled") await service.value.stop();
  if (browser.status === "fulfilled") await browser.value.close();
  throw service.status === "rejected" ? service.reason : (browser as PromiseRejectedResult).reason;
}

// ---------------------------------------------------------------------------------------------
// The test pages

export interface PageServer {
  origin: string;
  /** Registers a page at `path`; `scripts` are served files (no inline code under the CSP). */
  page(path: string, html: string): string;
  /** Registers a served script (for `ServiceWidget.init(...)` calls under the strict CSP). */
  script(path: string, js: string): string;
  /** Registers a served stylesheet (inline styles are refused by the CSP). */
  style(path: string, css: string): string;
  stop(): Promise<void>;
}

/** The fake bot check script: `grecaptcha.ready/execute`, answering the token `e2e-captcha-<n>`. */
const FAKE_CAPTCHA_JS = `
(function () {
  var n = 0;
  window.grecaptcha = {
    ready: function (cb) { cb(); },
    execute: function (siteKey, opts) {
      n += 1;
      window.__captchaCalls = (window.__captchaCalls || []).concat([{ siteKey: siteKey, action: opts && opts.action }]);
      return Promise.resolve("e2e-captcha-" + n);
    }
  };
})();
`;

/**
 * Pages are served with a strict CSP: scripts only from the page's own origin and the service
 * (the widget and its media module), connections only to the service, styles only from files.
 */
export function startPageServer(serviceUrl: string): PageServer {
  const pages = new Map<string, { body: string; type: string }>();
  pages.set("/captcha/api.js", { body: FAKE_CAPTCHA_JS, type: "text/javascript; charset=utf-8" });
  pages.set("/page.css", {
    body: "body{font:16px/1.5 serif;margin:2rem;color:#000;background:#fff}#slot{margin:2rem 0}",
    type: "text/css; charset=utf-8",
  });
  const csp = [
    "default-src 'none'",
    `script-src 'self' ${serviceUrl}`,
    // The service's WebSocket address too: a live call's media connection (a page using live calls
    // lists its media server there).
    `connect-src ${serviceUrl} ${serviceUrl.replace(/^http/, "ws")}`,
    "style-src 'self'",
    "img-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      const found = pages.get(path);
      if (!found) return new Response("not found", { status: 404 });
      const headers: Record<string, string> = { "content-type": found.type, "cache-control": "no-store" };
      if (found.type.startsWith("text/html")) headers["content-security-policy"] = csp;
      return new Response(found.body, { headers });
    },
  });
  const origin = `http://127.0.0.1:${server.port}`;
  return {
    origin,
    page(path, html) {
      pages.set(path, { body: html, type: "text/html; charset=utf-8" });
      return `${origin}${path}`;
    },
    script(path, js) {
      pages.set(path, { body: js, type: "text/javascript; charset=utf-8" });
      return `${origin}${path}`;
    },
    style(path, css) {
      pages.set(path, { body: css, type: "text/css; charset=utf-8" });
      return `${origin}${path}`;
    },
    stop: () => server.stop(true),
  };
}

/**
 * A plain page in `lang` with a slot for the widget and the given tags at the end of the body;
 * `styles` are served stylesheets linked after the page's own.
 */
export function pageHtml(opts: { lang?: string; tags: string; styles?: string[] }): string {
  const links = ["/page.css", ...(opts.styles ?? [])].map((href) => `<link rel="stylesheet" href="${href}">`);
  return `<!doctype html>
<html lang="${opts.lang ?? "en"}">
<head><meta charset="utf-8"><title>Shop</title>${links.join("")}</head>
<body>
<main>
<h1>Contact us</h1>
<p>Questions about an order? Talk to our agent.</p>
<div id="slot"></div>
</main>
${opts.tags}
</body>
</html>
`;
}

// ---------------------------------------------------------------------------------------------
// In the browser

/**
 * Installed before any page script (through the DevTools protocol, so it needs no CSP exception):
 * records every `service:statechange` and every CSP violation of the page.
 */
const RECORDER = `
window.__states = [];
window.__clicks = [];
document.addEventListener("click", function () { window.__clicks.push(performance.now()); }, true);
window.__cspViolations = [];
document.addEventListener("service:statechange", function (e) {
  window.__states.push(Object.assign({ t: performance.now() }, e.detail));
});
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push({ directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample });
});
`;

export interface Recorded {
  page: Page;
  context: BrowserContext;
  /** Every request the page made, in order (URL). */
  requests: string[];
  /** The POST requests to the service's /web-calls, in order. */
  calls: string[];
  /** Console messages of type error and page errors. */
  errors: string[];
  close(): Promise<void>;
}

export async function openPage(
  browser: Browser,
  opts: { microphone?: boolean; locale?: string } = {},
): Promise<Recorded> {
  const context = await browser.newContext({
    permissions: opts.microphone === false ? [] : ["microphone"],
    locale: opts.locale ?? "en-US",
    viewport: { width: 640, height: 420 },
  });
  const page = await context.newPage();
  page.setDefaultTimeout(20_000);
  await page.addInitScript(RECORDER);
  const requests: string[] = [];
  const calls: string[] = [];
  const errors: string[] = [];
  page.on("request", (r) => {
    requests.push(r.url());
    if (r.method() === "POST" && r.url().endsWith("/api/v1/web-calls")) calls.push(r.url());
  });
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(String(e)));
  return { page, context, requests, calls, errors, close: () => context.close() };
}

export interface StateRecord {
  state: string;
  error?: string;
  t: number;
}

export function states(page: Page): Promise<StateRecord[]> {
  return page.evaluate(() => (window as unknown as { __states: StateRecord[] }).__states);
}

export function cspViolations(page: Page): Promise<unknown[]> {
  return page.evaluate(() => (window as unknown as { __cspViolations: unknown[] }).__cspViolations);
}

/** Waits until the widget reports `state` (and `error`, when given). */
export async function waitForState(page: Page, state: string, error?: string, timeout = 20_000) {
  await page.waitForFunction(
    ([s, e]) => {
      const list = (window as unknown as { __states: StateRecord[] }).__states;
      const last = list[list.length - 1];
      return !!last && last.state === s && (e === null || last.error === e);
    },
    [state, error ?? null] as const,
    { timeout },
  );
}

/** The widget's button, through its open shadow root. */
export function widgetButton(page: Page) {
  return page.locator("service-widget").locator("button");
}

const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

export function ensureScreenshotDir() {
  mkdirSync(SCREENSHOTS, { recursive: true });
}

/** The web-call requests among `requests`. */
export function webCallRequests(requests: string[], serviceUrl: string): string[] {
  return requests.filter((u) => u === `${serviceUrl}/api/v1/web-calls`);
}

/** Milliseconds from the last click to the first `state` after it, in page time. */
export async function sinceClick(page: Page, state: string): Promise<number> {
  return page.evaluate((s) => {
    const w = window as unknown as { __states: StateRecord[]; __clicks: number[] };
    const click = w.__clicks[w.__clicks.length - 1]!;
    const reached = w.__states.find((r) => r.t >= click && r.state === s);
    if (!reached) throw new Error(`no ${s} after the click`);
    return reached.t - click;
  }, state);
}

/** axe-core's violations on the whole page (shadow roots included), each with its rule and targets. */
export async function axeViolations(page: Page) {
  const loaded = await page.evaluate(() => typeof (window as unknown as { axe?: unknown }).axe === "object");
  if (!loaded) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: unknown): Promise<{ violations: unknown[] }> } }).axe;
    const result = await axe.run(document);
    return result.violations.map((v) => {
      const x = v as { id: string; help: string; nodes: { target: unknown }[] };
      return { id: x.id, help: x.help, targets: x.nodes.map((n) => n.target) };
    });
  });
}
