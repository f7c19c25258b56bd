import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import {
  cspViolations,
  ensureScreenshotDir,
  openPage,
  type PageServer,
  type Recorded,
  SCREENSHOTS,
  type Service,
  startPageServer,
  startServiceAndBrowser,
  waitForState,
  widgetButton,
} from "./support.ts";

/**
 * The widget looks the same on any page: on a hostile page (`* { font-size: 40px !important; color:
 * red !important }`), a page with `html { font-size: 10px }` and a right-to-left page, its computed
 * styles and its screenshot (pixel by pixel, with a small tolerance for antialiasing) are those of the
 * plain page, idle and in the error state, placed in a target and floating. With a target, the error
 * alert neither widens nor moves the button.
 */

let service: Service;
let pages: PageServer;
let browser: Browser;
/** A page without CSP where screenshots are decoded and compared (canvas). */
let lab: Page;
const open: Recorded[] = [];

const HOSTILE_PAGES = {
  hostile: "* { font-size: 40px !important; color: red !important }",
  "small-root": "html { font-size: 10px }",
  rtl: "html { direction: rtl }",
} as const;
type Variant = "plain" | keyof typeof HOSTILE_PAGES;
const VARIANTS = Object.keys(HOSTILE_PAGES) as (keyof typeof HOSTILE_PAGES)[];
type Mode = "target" | "floating";

beforeAll(async () => {
  ({ service, browser } = await startServiceAndBrowser());
  pages = startPageServer(service.url);
  ensureScreenshotDir();
  lab = await browser.newPage();
  for (const [name, css] of Object.entries(HOSTILE_PAGES)) pages.style(`/${name}.css`, css);
  // The slot at the same whole-pixel place on every page, so that text is drawn on the same pixel
  // grid everywhere (a fractional offset changes antialiasing, not looks).
  pages.style("/slot.css", "#slot { position: absolute; top: 160px; left: 48px; margin: 0 }");
  // A widget that waits for a token the test hands over (window.__release): "" gives the error state.
  for (const mode of ["target", "floating"] as const) {
    pages.script(
      `/held-${mode}.js`,
      `window.__widget = ServiceWidget.init({
  ${mode === "target" ? 'target: "#slot",' : ""}
  getSessionToken: function () { return new Promise(function (r) { window.__release = r; }); }
});`,
    );
    for (const variant of ["plain", ...VARIANTS] as Variant[]) {
      // Nothing of the page behind the widget: what shows through its transparent parts is the
      // page's background only, the same everywhere.
      const styles = ["/page.css", "/slot.css", ...(variant === "plain" ? [] : [`/${variant}.css`])];
      pages.page(
        `/${variant}-${mode}.html`,
        `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Shop</title>${styles.map((href) => `<link rel="stylesheet" href="${href}">`).join("")}</head>
<body><div id="slot"></div>
<script src="${service.url}/widget/v1.js"></script>
<script src="/held-${mode}.js"></script>
</body>
</html>
`,
      );
    }
  }
});

afterEach(async () => {
  for (const r of open.splice(0)) {
    expect(await cspViolations(r.page)).toEqual([]);
    await r.close();
  }
});

afterAll(async () => {
  await browser?.close();
  await pages?.stop();
  await service?.stop();
});

/** Properties of every element of the widget (host included) that decide how it looks. */
const LOOKS = [
  "display",
  "position",
  "width",
  "height",
  "font-family",
  "font-size",
  "font-weight",
  "font-style",
  "line-height",
  "letter-spacing",
  "word-spacing",
  "text-align",
  "text-indent",
  "text-transform",
  "direction",
  "color",
  "background-color",
  "margin-top",
  "margin-right",
  "margin-bottom",
  "margin-left",
  "padding-top",
  "padding-right",
  "padding-bottom",
  "padding-left",
  "border-top-width",
  "border-right-width",
  "border-bottom-width",
  "border-left-width",
  "border-top-left-radius",
  "gap",
  "flex-direction",
  "align-items",
];

interface Snapshot {
  /** Per element (host, then the shadow root's in document order): `tag.class property` → value. */
  styles: Record<string, string>;
  button: Box;
  alert: Box | null;
  png: Buffer;
}

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

async function openWidget(variant: Variant, mode: Mode) {
  const r = await openPage(browser);
  open.push(r);
  await r.page.goto(`${pages.origin}/${variant}-${mode}.html`);
  await widgetButton(r.page).waitFor();
  await r.page.mouse.move(0, 0);
  return r.page;
}

async function snapshot(page: Page): Promise<Snapshot> {
  const styles = await page.evaluate((props) => {
    const host = document.querySelector("service-widget")!;
    const elements = [host, ...host.shadowRoot!.querySelectorAll("*")];
    const out: Record<string, string> = {};
    elements.forEach((el, i) => {
      const s = getComputedStyle(el);
      const name = `${i} ${el.tagName.toLowerCase()}.${el.getAttribute("class") ?? ""}`;
      for (const p of props) out[`${name} ${p}`] = s.getPropertyValue(p);
    });
    return out;
  }, LOOKS);
  const box = async (selector: string) => {
    const b = await page.locator("service-widget").locator(selector).boundingBox();
    return b && b.width > 0 ? b : null;
  };
  const png = await page.locator("service-widget").screenshot();
  return { styles, button: (await box("button"))!, alert: await box(".alert"), png };
}

async function toError(page: Page) {
  await widgetButton(page).click();
  await waitForState(page, "connecting");
  await page.waitForFunction(
    () => typeof (window as unknown as { __release?: unknown }).__release === "function",
  );
  await page.evaluate(() => (window as unknown as { __release: (t: string) => void }).__release(""));
  await waitForState(page, "error", "invalid_session_token");
  await page.mouse.move(0, 0);
  await widgetButton(page).blur();
}

/**
 * Decodes two PNGs in the browser and compares them: same size, and how many pixels differ by more
 * than `tolerance` in some channel.
 */
async function pixelDiff(a: Buffer, b: Buffer, tolerance = 48) {
  return lab.evaluate(
    async ([a64, b64, tol]) => {
      const decode = async (b64: string) => {
        const img = new Image();
        img.src = `data:image/png;base64,${b64}`;
        await img.decode();
        const canvas = document.createElement("canvas");
        canvas.width = img.naturalWidth;
        canvas.height = img.naturalHeight;
        const ctx = canvas.getContext("2d")!;
        ctx.drawImage(img, 0, 0);
        return ctx.getImageData(0, 0, canvas.width, canvas.height);
      };
      const [x, y] = await Promise.all([decode(a64 as string), decode(b64 as string)]);
      const size = (d: ImageData) => `${d.width}x${d.height}`;
      if (size(x) !== size(y)) return { sizes: [size(x), size(y)], differing: -1, pixels: 0 };
      let differing = 0;
      for (let i = 0; i < x.data.length; i += 4) {
        for (let c = 0; c < 4; c++) {
          if (Math.abs(x.data[i + c]! - y.data[i + c]!) > (tol as number)) {
            differing++;
            break;
          }
        }
      }
      return { sizes: [size(x), size(y)], differing, pixels: x.width * x.height };
    },
    [a.toString("base64"), b.toString("base64"), tolerance] as const,
  );
}

/** At most 1% of the pixels may differ (antialiasing); a different size or font fails by far. */
async function expectSameLooks(name: string, plain: Snapshot, other: Snapshot) {
  writeFileSync(join(SCREENSHOTS, `looks-${name}.png`), other.png);
  const differences = Object.keys(plain.styles)
    .filter((k) => other.styles[k] !== plain.styles[k])
    .map((k) => `${k}: ${plain.styles[k]} → ${other.styles[k]}`);
  expect(differences).toEqual([]);
  const diff = await pixelDiff(plain.png, other.png);
  expect(diff.sizes[1]).toBe(diff.sizes[0]!);
  expect(diff.differing).toBeLessThanOrEqual(diff.pixels / 100);
}

describe.each(["target", "floating"] as const)("placed %s", (mode) => {
  let plainIdle: Snapshot;
  let plainError: Snapshot;

  beforeAll(async () => {
    const page = await openWidget("plain", mode);
    plainIdle = await snapshot(page);
    await toError(page);
    plainError = await snapshot(page);
    writeFileSync(join(SCREENSHOTS, `looks-plain-${mode}-idle.png`), plainIdle.png);
    writeFileSync(join(SCREENSHOTS, `looks-plain-${mode}-error.png`), plainError.png);
  });

  test("the comparison can fail: another page's screenshot and styles are told apart", async () => {
    expect(plainError.styles).not.toEqual(plainIdle.styles);
    const diff = await pixelDiff(plainIdle.png, plainError.png);
    expect(diff.sizes[0] !== diff.sizes[1] || diff.differing > diff.pixels / 100).toBe(true);
  });

  test.each(VARIANTS)("on the %s page it looks as on the plain page, idle and in error", async (variant) => {
    const page = await openWidget(variant, mode);
    await expectSameLooks(`${variant}-${mode}-idle`, plainIdle, await snapshot(page));
    await toError(page);
    await expectSameLooks(`${variant}-${mode}-error`, plainError, await snapshot(page));
  });

  if (mode === "target") {
    test.each(["plain", ...VARIANTS] as Variant[])(
      "on the %s page the error alert neither widens nor moves the button",
      async (variant) => {
        const page = await openWidget(variant, mode);
        const idle = await snapshot(page);
        await toError(page);
        const error = await snapshot(page);
        expect(error.alert).not.toBeNull();
        // The button keeps its place (its label, and so its width, is that of the error state).
        expect({ x: error.button.x, y: error.button.y }).toEqual({ x: idle.button.x, y: idle.button.y });
        expect(error.button.height).toBe(idle.button.height);
        expect(error.alert!.width).toBeLessThanOrEqual(error.button.width + 0.5);
        // The whole widget is no wider than its button.
        const host = (await page.locator("service-widget").boundingBox())!;
        expect(host.width).toBeLessThanOrEqual(error.button.width + 0.5);
      },
    );
  }
});
