import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Server } from "bun";
import type { Browser } from "playwright-core";
import { EVENT_TYPES } from "../../src/services/events.ts";
import { createTestContext, type TestContext } from "../helpers/app.ts";
import { launchBrowser } from "./support.ts";

/** /api/docs in a browser: the API reference renders, webhooks included, under its strict CSP. */

let ctx: TestContext;
let server: Server<undefined>;
let browser: Browser;
beforeAll(async () => {
  ctx = await createTestContext();
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) => ctx.app.fetch(req, { remoteAddress: "127.0.0.1" }),
  });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  server?.stop(true);
  await ctx?.close();
});

test("the reference lists every event type under Webhooks, with no CSP violation", async () => {
  const page = await browser.newPage();
  const violations: string[] = [];
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
  });
  await page.goto(`http://127.0.0.1:${server.port}/api/docs`);
  await page.waitForSelector("text=knowledge.document_ready", { timeout: 30_000 });
  const text = (await page.textContent("body")) ?? "";
  expect(text).toContain("Webhooks");
  for (const type of EVENT_TYPES) expect(text).toContain(type);
  expect(violations).toEqual([]);
  await page.close();
});
