import type { WidgetFiles } from "./build.ts";

/**
 * The widget files built ahead of time. `null` when running from the sources: the server then
 * builds them from widget/src at start. The executable build replaces this module's text with
 * `prebuiltWidgetModule(...)` (see build.ts), so the executable serves the files it carries.
 */
export const prebuiltWidget: WidgetFiles | null = null;
