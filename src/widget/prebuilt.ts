import type { EncodedAssets } from "./assets.ts";

/**
 * The widget files inside the executable. `null` when running from the sources: the server then reads
 * the build in widget/dist/ (`npm run build:widget`). The executable build replaces this module's text
 * with `prebuiltWidgetModule(...)` (see assets.ts and src/build.ts), so the executable serves the
 * files it carries, already compressed.
 */
export const prebuiltWidget: EncodedAssets | null = null;
