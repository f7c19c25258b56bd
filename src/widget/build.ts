import { join } from "node:path";

/** The two widget files, as served under `/widget/`. */
export interface WidgetFiles {
  /** `v1.js`: the button, a classic script (IIFE) with no dependency. */
  "v1.js": string;
  /** `v1/media.js`: the real-time media client (livekit-client), an ES module imported on first use. */
  "v1/media.js": string;
}

const root = join(import.meta.dir, "..", "..");
const widgetSource = join(root, "widget", "src");

/** Builds both files from widget/src with Bun's bundler, minified, for browsers. */
export async function buildWidgetFiles(): Promise<WidgetFiles> {
  const common = {
    target: "browser",
    minify: true,
    sourcemap: "none",
    // Preact's production JSX runtime, and no development checks in the bundled libraries.
    define: { "process.env.NODE_ENV": '"production"' },
  } as const;
  const [button, media] = await Promise.all([
    Bun.build({ ...common, entrypoints: [join(widgetSource, "index.ts")], format: "iife" }),
    Bun.build({ ...common, entrypoints: [join(widgetSource, "media.ts")], format: "esm", splitting: false }),
  ]);
  return { "v1.js": await single(button, "v1.js"), "v1/media.js": await single(media, "v1/media.js") };
}

async function single(output: Bun.BuildOutput, name: string): Promise<string> {
  const files = output.outputs.filter((o) => o.kind === "entry-point");
  if (!output.success || files.length !== 1) {
    const logs = output.logs.map((l) => l.message).join("; ");
    throw new Error(`widget build failed for ${name}: ${logs || "no single output"}`);
  }
  return files[0]!.text();
}

/** Path of the module that the executable build overrides with the prebuilt files. */
export const PREBUILT_MODULE_PATH = join(import.meta.dir, "prebuilt.ts");
