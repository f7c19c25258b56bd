import { Buffer } from "node:buffer";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Encoding } from "../http/contentNegotiation.ts";
import type { Logger } from "../log.ts";
import { prebuiltWidget } from "./prebuilt.ts";

/** The two widget files, as served under `/widget/`. */
export interface WidgetFiles {
  /** `v1.js`: the button, a classic script (IIFE) with no dependency. */
  "v1.js": string;
  /** `v1/media.js`: the real-time media client (livekit-client), an ES module imported on first use. */
  "v1/media.js": string;
}

export const WIDGET_FILES = ["v1.js", "v1/media.js"] as const satisfies readonly (keyof WidgetFiles)[];
export const ENCODINGS = ["identity", "gzip", "br"] as const satisfies readonly Encoding[];

/** One served file, compressed ahead of time in every encoding, with one ETag per encoding. */
export interface WidgetAsset {
  bodies: Record<Encoding, Uint8Array<ArrayBuffer>>;
  etags: Record<Encoding, string>;
}

export type WidgetAssets = Record<keyof WidgetFiles, WidgetAsset>;

/** widget/dist/manifest.json: written last by the build (widget/build.ts), so its presence means a complete build. */
export const MANIFEST = "manifest.json";

export interface WidgetManifest {
  /** Hash of what the build was made from; the start scripts rebuild when it no longer matches. */
  source: string;
  files: Record<keyof WidgetFiles, { bytes: number; gzipBytes: number; etags: Record<Encoding, string> }>;
}

/** Where the build writes the widget in a checkout of the sources. */
export function widgetDistDir(): string {
  return fileURLToPath(new URL("../../widget/dist", import.meta.url));
}

/** `v1.js`, `v1.js.gz`, `v1.js.br`: the file of each encoding in widget/dist/. */
export function fileName(name: keyof WidgetFiles, encoding: Encoding): string {
  return encoding === "identity" ? name : `${name}.${encoding === "gzip" ? "gz" : "br"}`;
}

/** Reads a build (widget/dist/): every file in every encoding, and the ETags of its manifest. */
export async function readBuiltWidget(dir: string): Promise<WidgetAssets> {
  let manifest: WidgetManifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, MANIFEST), "utf8")) as WidgetManifest;
  } catch {
    throw new Error(`the widget is not built in ${dir}: run \`npm run build:widget\``);
  }
  const out = {} as WidgetAssets;
  for (const name of WIDGET_FILES) {
    const read = async (e: Encoding) => new Uint8Array(await readFile(join(dir, fileName(name, e))));
    const [identity, gzip, br] = await Promise.all(ENCODINGS.map(read));
    out[name] = { bodies: { identity: identity!, gzip: gzip!, br: br! }, etags: manifest.files[name].etags };
  }
  return out;
}

/** Prepared assets as JSON-safe text (base64 bodies), for the module the executable carries. */
export type EncodedAssets = Record<
  keyof WidgetFiles,
  { bodies: Record<Encoding, string>; etags: Record<Encoding, string> }
>;

/**
 * The source replacing `prebuilt.ts` in the executable (see src/build.ts): the built files, already
 * compressed, carried as a module so the executable needs no widget/dist/ beside it.
 */
export async function prebuiltWidgetModule(dir: string): Promise<string> {
  const assets = await readBuiltWidget(dir);
  const encoded = {} as EncodedAssets;
  for (const name of WIDGET_FILES) {
    const { bodies, etags } = assets[name];
    const base64 = (b: Uint8Array) => Buffer.from(b).toString("base64");
    encoded[name] = {
      etags,
      bodies: { identity: base64(bodies.identity), gzip: base64(bodies.gzip), br: base64(bodies.br) },
    };
  }
  return `export const prebuiltWidget = ${JSON.stringify(encoded)};\n`;
}

function decodeAssets(encoded: EncodedAssets): WidgetAssets {
  const out = {} as WidgetAssets;
  for (const name of WIDGET_FILES) {
    const { bodies, etags } = encoded[name];
    const body = (b64: string) => new Uint8Array(Buffer.from(b64, "base64"));
    out[name] = {
      etags,
      bodies: { identity: body(bodies.identity), gzip: body(bodies.gzip), br: body(bodies.br) },
    };
  }
  return out;
}

let loading: Promise<WidgetAssets> | undefined;

/**
 * The widget files, ready to serve: those the executable carries, else the build in widget/dist/.
 * Read once per process; `preloadWidget` starts it at boot so no visitor waits for it.
 */
export function widgetAssets(log?: Logger): Promise<WidgetAssets> {
  loading ??= (async () => {
    const started = performance.now();
    const assets = prebuiltWidget ? decodeAssets(prebuiltWidget) : await readBuiltWidget(widgetDistDir());
    log?.info("widget ready", {
      source: prebuiltWidget ? "executable" : "widget/dist",
      ms: Math.round(performance.now() - started),
      v1Bytes: assets["v1.js"].bodies.identity.byteLength,
      v1GzipBytes: assets["v1.js"].bodies.gzip.byteLength,
    });
    return assets;
  })();
  // A missing build is looked for again on the next request rather than remembered.
  loading.catch(() => {
    loading = undefined;
  });
  return loading;
}

/** Starts reading the widget in the background; a failure is logged and retried on the next request. */
export function preloadWidget(log: Logger): void {
  widgetAssets(log).catch((err: Error) => {
    log.error("widget unavailable", { error: err.message });
  });
}
