import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import type { Encoding } from "../http/contentNegotiation.ts";
import type { Logger } from "../log.ts";
import { buildWidgetFiles, type WidgetFiles } from "./build.ts";
import { prebuiltWidget } from "./prebuilt.ts";

const gzipAsync = promisify(gzip);
const brotliAsync = promisify(brotliCompress);

/** One served file, compressed once in every encoding, with one ETag per encoding. */
export interface WidgetAsset {
  bodies: Record<Encoding, Uint8Array<ArrayBuffer>>;
  etags: Record<Encoding, string>;
}

export type WidgetAssets = Record<keyof WidgetFiles, WidgetAsset>;

/**
 * Compresses a file ahead of time, never per request: gzip level 9, brotli at its best quality for
 * the button script; for the large media client quality 10 is 2% bigger and takes a third of the time.
 */
export async function prepareAsset(text: string): Promise<WidgetAsset> {
  const identity = new TextEncoder().encode(text);
  const [gz, br] = await Promise.all([
    gzipAsync(identity, { level: 9 }),
    brotliAsync(identity, {
      params: {
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_QUALITY]: identity.byteLength > 100_000 ? 10 : constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_SIZE_HINT]: identity.byteLength,
      },
    }),
  ]);
  const hash = createHash("sha256").update(identity).digest("base64url").slice(0, 22);
  return {
    bodies: { identity, gzip: new Uint8Array(gz), br: new Uint8Array(br) },
    // Each encoding is its own representation, so each has its own strong validator.
    etags: { identity: `"${hash}"`, gzip: `"${hash}-gz"`, br: `"${hash}-br"` },
  };
}

/** Prepared assets as JSON-safe text (base64 bodies), for the module the executable carries. */
export type EncodedAssets = Record<
  keyof WidgetFiles,
  { bodies: Record<Encoding, string>; etags: Record<Encoding, string> }
>;

export function encodeAssets(assets: WidgetAssets): EncodedAssets {
  const out = {} as EncodedAssets;
  for (const [name, a] of Object.entries(assets) as [keyof WidgetFiles, WidgetAsset][]) {
    out[name] = {
      etags: a.etags,
      bodies: {
        identity: Buffer.from(a.bodies.identity).toString("base64"),
        gzip: Buffer.from(a.bodies.gzip).toString("base64"),
        br: Buffer.from(a.bodies.br).toString("base64"),
      },
    };
  }
  return out;
}

function decodeAssets(encoded: EncodedAssets): WidgetAssets {
  const out = {} as WidgetAssets;
  for (const [name, a] of Object.entries(encoded) as [
    keyof WidgetFiles,
    EncodedAssets[keyof WidgetFiles],
  ][]) {
    const body = (b64: string) => new Uint8Array(Buffer.from(b64, "base64"));
    out[name] = {
      etags: a.etags,
      bodies: { identity: body(a.bodies.identity), gzip: body(a.bodies.gzip), br: body(a.bodies.br) },
    };
  }
  return out;
}

/**
 * The source replacing `prebuilt.ts` in the executable: the files already compressed, so the
 * executable spends no start-up time on compression.
 */
export async function prebuiltWidgetModule(files: WidgetFiles): Promise<string> {
  return `export const prebuiltWidget = ${JSON.stringify(encodeAssets(await prepareAssets(files)))};\n`;
}

export async function prepareAssets(files: WidgetFiles): Promise<WidgetAssets> {
  const [v1, media] = await Promise.all([prepareAsset(files["v1.js"]), prepareAsset(files["v1/media.js"])]);
  return { "v1.js": v1, "v1/media.js": media };
}

let loading: Promise<WidgetAssets> | undefined;

/**
 * The widget files, ready to serve: the prebuilt ones in the executable, else built from the
 * sources. Done once per process; `preloadWidget` starts it at boot so no visitor waits for it.
 */
export function widgetAssets(log?: Logger): Promise<WidgetAssets> {
  loading ??= (async () => {
    const started = performance.now();
    const assets = prebuiltWidget
      ? decodeAssets(prebuiltWidget)
      : await prepareAssets(await buildWidgetFiles());
    log?.info("widget ready", {
      source: prebuiltWidget ? "prebuilt" : "built from sources",
      ms: Math.round(performance.now() - started),
      v1Bytes: assets["v1.js"].bodies.identity.byteLength,
      v1GzipBytes: assets["v1.js"].bodies.gzip.byteLength,
    });
    return assets;
  })();
  // A failed build is tried again on the next request rather than remembered.
  loading.catch(() => {
    loading = undefined;
  });
  return loading;
}

/** Starts preparing the widget in the background; a failure is logged and retried on the next request. */
export function preloadWidget(log: Logger): void {
  widgetAssets(log).catch((err: Error) => {
    log.error("widget build failed", { error: err.message });
  });
}
