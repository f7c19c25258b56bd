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
import { type PgliteFiles, TEMPLATE_ASSET } from "./runtime.ts";

let engine: Promise<WebAssembly.Module> | undefined;
let initdb: Promise<WebAssembly.Module> | undefined;

/** The embedded database's thread, from the project's root (src/build.ts builds it as an entry). */
export const WORKER_ENTRY = "src/db/engine/pgliteWorker.ts";

const compiled = engineWasmPath.startsWith("/$bunfs/") || engineWasmPath.startsWith("B:/~BUN/");

export const bunPgliteFiles: PgliteFiles = {
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
  fsBundle: async () => Bun.file(fsBundlePath),
  // Inside the executable the worker is an entry of the build (src/build.ts), named by its path from
  // the build's root; from the sources, by its file.
  thread: () =>
    compiled
      ? new Worker(`./${WORKER_ENTRY}`, { type: "module" })
      : new Worker(new URL(`../../${WORKER_ENTRY}`, import.meta.url).href, { type: "module" }),
  embeddedTemplate: () =>
    (Bun.embeddedFiles as File[]).find((f) => f.name.startsWith(`${TEMPLATE_ASSET}`)) ?? null,
  templateCacheDir: () => {
    if (compiled) return null;
    // fsBundlePath is <node_modules>/@electric-sql/pglite/dist/pglite.data.
    const nodeModules = fsBundlePath.split(/[\\/]/).slice(0, -4).join("/");
    return `${nodeModules}/.cache/voice-service`;
  },
};
