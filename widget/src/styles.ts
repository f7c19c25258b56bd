/**
 * The widget's only styles, adopted by its shadow root. Nothing of the page may change how it looks:
 * - the page can style the host element itself, even with `!important` (`* { font-size: 40px
 *   !important }`): every declaration on `:host` is `!important`, which wins there over the page's,
 *   and `all: initial` drops whatever else the page set on it (`direction` and `unicode-bidi`, which
 *   `all` leaves alone, are set too);
 * - inherited values (font, colour, spacing, direction) would cross into the shadow root: the host's
 *   `all: initial` stops them, and the widget's box (`.w`) sets each of them explicitly for everything
 *   inside, in px (never `em` or `rem`, which follow the page); the button's `all: unset` makes it
 *   inherit them from there too.
 * With a target the alert goes below the button at the button's width (`contain: inline-size` keeps
 * its text from widening the widget), so an error never moves the button; floating, it goes above.
 * Colours: white on #1d4ed8 is 6.7:1, on #b91c1c 6.5:1, on #374151 10.3:1, #991b1b on white 8.3:1.
 */
export const CSS = `
:host{all:initial!important;display:inline-block!important;position:relative!important;direction:ltr!important;unicode-bidi:isolate!important}
:host([data-floating]){position:fixed!important;right:20px!important;bottom:20px!important;z-index:2147483000!important}
*{box-sizing:border-box;margin:0;padding:0;border:0 solid transparent}
.w{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:15px;font-weight:500;font-style:normal;font-variant:normal;font-stretch:normal;line-height:20px;letter-spacing:0;word-spacing:0;text-align:left;text-indent:0;text-transform:none;text-decoration:none;text-shadow:none;white-space:normal;overflow-wrap:break-word;direction:ltr;unicode-bidi:isolate;writing-mode:horizontal-tb;color:#111827;visibility:visible;display:flex;flex-direction:column;align-items:flex-end;gap:8px}
button{all:unset;box-sizing:border-box;display:inline-flex;align-items:center;gap:10px;min-height:44px;padding:10px 18px;border-radius:999px;background:#1d4ed8;color:#fff;font-weight:600;white-space:nowrap;cursor:pointer;box-shadow:0 2px 8px rgba(0,0,0,.25)}
button:hover{background:#1e40af}
button:focus,button:focus-visible{outline:3px solid #111827;outline-offset:2px;box-shadow:0 0 0 2px #fff,0 0 0 7px #fff}
.connecting button{background:#374151;cursor:progress}
.in-call button{background:#b91c1c}
.in-call button:hover{background:#991b1b}
.dot{display:block;width:10px;height:10px;border-radius:50%;background:#fff;flex:none}
.connecting .dot,.in-call .dot{animation:p 1.2s ease-in-out infinite}
@keyframes p{50%{opacity:.35;transform:scale(.7)}}
@media (prefers-reduced-motion:reduce){.dot{animation:none!important}}
.alert{display:block;order:-1;max-width:280px;margin:0;padding:8px 12px;border:1px solid #991b1b;border-radius:8px;background:#fff;color:#991b1b;font-size:14px;line-height:18px}
:host(:not([data-floating])) .alert{order:1;align-self:stretch;max-width:none;contain:inline-size}
.alert:empty{display:none}
.sr{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;border:0}
`;

/**
 * Constructable stylesheets work under a strict Content-Security-Policy (no 'unsafe-inline').
 * Browsers without them get a <style> element inside the shadow root instead.
 */
export function adoptStyles(root: ShadowRoot): void {
  const doc = root.ownerDocument;
  const style = doc.createElement("style");
  style.textContent = CSS;
  if ("adoptedStyleSheets" in root) {
    try {
      const sheet = new (doc.defaultView as Window & typeof globalThis).CSSStyleSheet();
      sheet.replaceSync(style.textContent);
      root.adoptedStyleSheets = [sheet];
      return;
    } catch {
      // Older engines (no constructable stylesheets): fall back below.
    }
  }
  root.appendChild(style);
}
