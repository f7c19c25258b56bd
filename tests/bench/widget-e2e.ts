/**
 * `npm run bench:widget-e2e`: the widget in headless Chromium against the real service (PostgreSQL,
 * or the embedded database with TEST_DATABASE=embedded), on a page under a strict CSP with a test
 * session token minted through the API:
 *
 * - requests before the first interaction (count, and bytes of the widget script on the wire);
 * - click → `connecting` and click → `in-call` for a simulated call, in page time (performance.now()
 *   of the click event and of the `service:statechange` events), each sample a fresh browser context
 *   (cold page, cached nothing), the click being the first interaction (so it includes the warm-up).
 *
 * The service allows 6 web calls per 10 minutes per visitor address, so samples come in rounds of 6,
 * each round on a freshly started service. `ROUNDS` (default 2) sets how many.
 */
import type { Browser } from "playwright-core";
import {
  launchBrowser,
  openPage,
  pageHtml,
  sinceClick,
  startPageServer,
  startService,
  waitForState,
  widgetButton,
} from "../e2e/support.ts";
import { machine } from "./lib.ts";

const ROUNDS = Number(process.env.ROUNDS ?? 2);
const PER_ROUND = 6;

interface Sample {
  connectingMs: number;
  inCallMs: number;
  requestsBeforeInteraction: number;
  scriptBytes: number;
}

async function round(browser: Browser): Promise<Sample[]> {
  const service = await startService();
  const pages = startPageServer(service.url);
  const samples: Sample[] = [];
  try {
    for (let i = 0; i < PER_ROUND; i++) {
      const token = await service.mintToken();
      const url = pages.page(
        `/bench-${i}.html`,
        pageHtml({
          tags: `<script src="${service.url}/widget/v1.js" data-session-token="${token}" data-target="#slot"></script>`,
        }),
      );
      const r = await openPage(browser);
      let scriptBytes = 0;
      r.page.on("response", async (res) => {
        if (res.url() === `${service.url}/widget/v1.js`) {
          scriptBytes = (await res.request().sizes()).responseBodySize;
        }
      });
      await r.page.goto(url);
      await widgetButton(r.page).waitFor();
      const requestsBeforeInteraction = r.requests.filter((u) => u.startsWith(service.url)).length;
      await widgetButton(r.page).click();
      await waitForState(r.page, "in-call");
      samples.push({
        connectingMs: await sinceClick(r.page, "connecting"),
        inCallMs: await sinceClick(r.page, "in-call"),
        requestsBeforeInteraction,
        scriptBytes,
      });
      await r.close();
    }
  } finally {
    await pages.stop();
    await service.stop();
  }
  return samples;
}

function stats(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const r = (x: number) => Math.round(x * 10) / 10;
  return {
    n: sorted.length,
    min: r(sorted[0]!),
    median: r(at(0.5)),
    p90: r(at(0.9)),
    max: r(sorted.at(-1)!),
  };
}

const browser = await launchBrowser();
const samples: Sample[] = [];
try {
  for (let i = 0; i < ROUNDS; i++) samples.push(...(await round(browser)));
} finally {
  await browser.close();
}

const result = {
  bench: "widget-e2e",
  machine: machine(),
  database: process.env.TEST_DATABASE === "embedded" ? "embedded" : "postgres",
  browser: browser.version(),
  clickToConnectingMs: stats(samples.map((s) => s.connectingMs)),
  clickToInCallMs: stats(samples.map((s) => s.inCallMs)),
  requestsBeforeInteraction: [...new Set(samples.map((s) => s.requestsBeforeInteraction))],
  widgetScriptBytesOnWire: [...new Set(samples.map((s) => s.scriptBytes))],
};
console.log(JSON.stringify(result, null, 2));
