/**
 * Where the embedded database's engine files come from under Bun.
 *
 * The files are imported with Bun's file loader: run from the sources they resolve to
 * node_modules, and `bun build --compile` embeds them so the executable reads nothing from disk.
 * The path is relative because PGlite's package exports do not expose its dist/ folder.
 */

import initdbWasmPath from "../../node_modules/@electric-sql/pglite/dist/initdb.wasm" with { type: "file" };
import fsBundlePath from "../../node_modules/@electric-sql/pglite/dist/pglite.data" with { type: "file" };
import engineWasmPath from "../../node_modules/@electric-sql/pglite/dist/pglite.wasm" with { type: "file" };
import pglitePackage from "../../node_modules/@electric-sql/pglite/package.json" with { type: "json" };

/** Name prefix of the pre-initialised data directory that the build embeds next to the code. */
export const TEMPLATE_ASSET = "pgdata-template";

export interface PgliteFiles {
  /** PGlite's version: a data directory template is only valid for the version that made it. */
  version: string;
  /** Where the engine is read from (`/$bunfs/…` inside the executable). */
  enginePath: string;
  /** The compiled PostgreSQL engine. */
  engine(): Promise<WebAssembly.Module>;
  /** The compiled initdb, only needed when no data directory template exists yet. */
  initdb(): Promise<WebAssembly.Module>;
  /** PGlite's read-only file bundle (share/, lib/ …). */
  fsBundle(): Blob;
  /** The data directory template embedded by the build, or null when running from the sources. */
  embeddedTemplate(): Blob | null;
  /** Where the sources keep the template between runs (node_modules/.cache), or null in the executable. */
  templateCacheDir(): string | null;
}

let engine: Promise<WebAssembly.Module> | undefined;
let initdb: Promise<WebAssembly.Module> | undefined;

const compiled = engineWasmPath.startsWith("/$bunfs/") || engineWasmPath.startsWith("B:/~BUN/");

export const pgliteFiles: PgliteFiles = {
  version: pglitePackage.version,
  enginePath: engineWasmPath,
  // Compiled once per process; the promise is shared so compilation can start early and overlap other work.
  engine: () => {
    engine ??= Bun.file(engineWasmPath)
      .arrayBuffer()
      .then((bytes) => WebAssembly.compile(bytes));
    return engine;
  },
  initdb: () => {
    initdb ??= Bun.file(initdbWasmPath)
      .arrayBuffer()
      .then((bytes) => WebAssembly.compile(bytes));
    return initdb;
  },
  fsBundle: () => Bun.file(fsBundlePath),
  embeddedTemplate: () =>
    (Bun.embeddedFiles as File[]).find((f) => f.name.startsWith(`${TEMPLATE_ASSET}`)) ?? null,
  templateCacheDir: () => {
    if (compiled) return null;
    // fsBundlePath is <node_modules>/@electric-sql/pglite/dist/pglite.data.
    const nodeModules = fsBundlePath.split(/[\\/]/).slice(0, -4).join("/");
    return `${nodeModules}/.cache/voice-service`;
  },
};
