/**
 * `/widget/v1.js`: defines `ServiceWidget` and, when its own script tag carries `data-key` or
 * `data-session-token`, adds the button. Nothing is requested before the visitor interacts.
 */
import { createWidget } from "./controller.tsx";
import { readScriptAttributes, wantsButton } from "./options.ts";
import { browserRuntime } from "./runtime.ts";
import type { WidgetHandle, WidgetOptions } from "./types.ts";

// Read while the script runs: later `currentScript` points elsewhere.
const script = document.currentScript as HTMLScriptElement | null;
const scriptUrl = script?.src || undefined;

function init(options: WidgetOptions): WidgetHandle {
  return createWidget(options ?? {}, { doc: document, scriptUrl, runtime: browserRuntime(window) });
}

(window as unknown as { ServiceWidget: unknown }).ServiceWidget = { init, version: "1" };

if (script && wantsButton(script)) {
  // The session token attribute leaves the page now, even if the button is added later.
  const options = readScriptAttributes(script);
  const mount = () => {
    try {
      init(options);
    } catch (err) {
      console.error((err as Error).message);
    }
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mount, { once: true });
  else mount();
}
