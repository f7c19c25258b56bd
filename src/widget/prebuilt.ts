import type { EncodedAssets } from "./assets.ts";

/**
 * The widget files built ahead of time. `null` when running from the sources: the server then
 * builds and compresses them from widget/src once listening. The executable build replaces this
 * module's text with `prebuiltWidgetModule(...)` (see assets.ts and src/build.ts), so the executable
 * serves the files it carries, already compressed.
 */
export const prebuiltWidget: EncodedAssets | null = null;
