/**
 * The widget's build, ahead of time: `npm run build:widget` (src/widget/write.ts), `npm start`,
 * `npm run start:deno` and `npm run build` run it; the server never does. It bundles widget/src with
 * Bun's bundler, compresses each file once (gzip and brotli) and writes them to widget/dist/ with a
 * manifest (widget/assets.ts reads them). A build tool run by Bun, not part of the server.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import type { Encoding } from "../http/contentNegotiation.ts";
import {
  ENCODINGS,
  fileName,
  MANIFEST,
  WIDGET_FILES,
  type WidgetFiles,
  type WidgetManifest,
  widgetDistDir,
} from "./assets.ts";

const gzipAsync = promisify(gzip);
const brotliAsync = promisify(brotliCompress);

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

/** The three encodings of one file, compressed once: gzip level 9, brotli at its best for the button. */
export async function compress(text: string): Promise<Record<Encoding, Uint8Array>> {
  const identity = new TextEncoder().encode(text);
  const [gz, br] = await Promise.all([
    gzipAsync(identity, { level: 9 }),
    brotliAsync(identity, {
      params: {
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        // For the large media client quality 10 is 2% bigger and takes a third of the time.
        [constants.BROTLI_PARAM_QUALITY]: identity.byteLength > 100_000 ? 10 : constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_SIZE_HINT]: identity.byteLength,
      },
    }),
  ]);
  return { identity, gzip: new Uint8Array(gz), br: new Uint8Array(br) };
}

/**
 * What the output is made from: every file of widget/src, this build's settings, the bundled
 * libraries' versions and the bundler's. The output is stale when this changes.
 */
export function widgetSourceHash(): string {
  const hash = createHash("sha256");
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    )) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else hash.update(`\0${path.slice(root.length)}\0`).update(readFileSync(path));
    }
  };
  walk(widgetSource);
  hash.update(readFileSync(join(import.meta.dir, "build.ts")));
  for (const pkg of ["preact", "livekit-client"]) {
    hash.update(
      `\0${pkg}@${JSON.parse(readFileSync(join(root, "node_modules", pkg, "package.json"), "utf8")).version}`,
    );
  }
  hash.update(`\0bun@${Bun.version}`);
  return hash.digest("hex").slice(0, 32);
}

/** The manifest of a complete build in `outDir`, or null when there is none (or it is unreadable). */
export function readManifest(outDir: string): WidgetManifest | null {
  try {
    return JSON.parse(readFileSync(join(outDir, MANIFEST), "utf8")) as WidgetManifest;
  } catch {
    return null;
  }
}

/**
 * Builds the widget into `outDir` (default widget/dist/), or, with `ifStale`, only when the output is
 * missing or was made from other sources. The new output is written beside and renamed into place,
 * so a server reading the folder never sees half a build. Returns whether it built.
 */
export async function writeWidget(opts: { outDir?: string; ifStale?: boolean } = {}): Promise<boolean> {
  const outDir = opts.outDir ?? widgetDistDir();
  const source = widgetSourceHash();
  const current = readManifest(outDir);
  if (
    opts.ifStale &&
    current?.source === source &&
    WIDGET_FILES.every((name) => ENCODINGS.every((e) => existsSync(join(outDir, fileName(name, e)))))
  ) {
    return false;
  }
  const files = await buildWidgetFiles();
  const staging = `${outDir}.${process.pid}.tmp`;
  rmSync(staging, { recursive: true, force: true });
  const manifest: WidgetManifest = { source, files: {} as WidgetManifest["files"] };
  for (const name of WIDGET_FILES) {
    const bodies = await compress(files[name]);
    const hash = createHash("sha256").update(bodies.identity).digest("base64url").slice(0, 22);
    for (const encoding of ENCODINGS) {
      const path = join(staging, fileName(name, encoding));
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, bodies[encoding]);
    }
    manifest.files[name] = {
      bytes: bodies.identity.byteLength,
      gzipBytes: bodies.gzip.byteLength,
      // Each encoding is its own representation, so each has its own strong validator.
      etags: { identity: `"${hash}"`, gzip: `"${hash}-gz"`, br: `"${hash}-br"` },
    };
  }
  writeFileSync(join(staging, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  const old = `${outDir}.${process.pid}.old`;
  if (existsSync(outDir)) renameSync(outDir, old);
  renameSync(staging, outDir);
  rmSync(old, { recursive: true, force: true });
  return true;
}
