/**
 * The widget's only styles, adopted by its shadow root. `:host { all: initial }` stops inherited page
 * styles (font, colour, spacing) at the boundary; nothing here can reach the page.
 * Colours: white on #1d4ed8 is 6.7:1, on #b91c1c 6.5:1, on #374151 10.3:1, #991b1b on white 8.3:1.
 */
export const CSS = `
:host{all:initial;display:inline-block;font:500 15px/1.3 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111827}
:host([data-floating]){position:fixed;right:20px;bottom:20px;z-index:2147483000}
.w{display:flex;flex-direction:column;align-items:flex-end;gap:8px}
button{all:unset;box-sizing:border-box;display:inline-flex;align-items:center;gap:10px;min-height:44px;padding:10px 18px;border-radius:999px;background:#1d4ed8;color:#fff;font:inherit;font-weight:600;cursor:pointer;box-shadow:0 2px 8px rgba(0,0,0,.25)}
button:hover{background:#1e40af}
button:focus,button:focus-visible{outline:3px solid #111827;outline-offset:2px;box-shadow:0 0 0 2px #fff,0 0 0 7px #fff}
.connecting button{background:#374151;cursor:progress}
.in-call button{background:#b91c1c}
.in-call button:hover{background:#991b1b}
.dot{width:10px;height:10px;border-radius:50%;background:currentColor;flex:none}
.connecting .dot,.in-call .dot{animation:p 1.2s ease-in-out infinite}
@keyframes p{50%{opacity:.35;transform:scale(.7)}}
@media (prefers-reduced-motion:reduce){.dot{animation:none!important}}
.alert{order:-1;margin:0;max-width:280px;padding:8px 12px;border-radius:8px;background:#fff;color:#991b1b;border:1px solid #991b1b;font-size:14px}
.alert:empty{display:none}
.sr{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;border:0}
`;

/**
 * Constructable stylesheets work under a strict Content-Security-Policy (no 'unsafe-inline').
 * Browsers without them get a <style> element inside the shadow root instead.
 */
export function adoptStyles(root: ShadowRoot): void {
  const doc = root.ownerDocument;
  const win = doc.defaultView as (Window & typeof globalThis) | null;
  const style = doc.createElement("style");
  style.textContent = CSS;
  if (win && "adoptedStyleSheets" in root && typeof win.CSSStyleSheet === "function") {
    try {
      const sheet = new win.CSSStyleSheet();
      sheet.replaceSync(style.textContent);
      root.adoptedStyleSheets = [sheet];
      return;
    } catch {
      // Older engines: fall back below.
    }
  }
  root.appendChild(style);
}
