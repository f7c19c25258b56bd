/**
 * `npm run build`: writes the single executable dist/voice-service.
 *
 * Everything the embedded database needs travels inside it: PGlite's engine, initdb and file
 * bundle are imported with Bun's file loader (src/runtime/bunFiles.ts), and the pre-initialised
 * data directory template is made here (or taken from node_modules/.cache) and added as an
 * embedded file, so a first start copies it instead of running initdb. The widget is built into
 * widget/dist/ when stale and carried as the module src/widget/prebuilt.ts inside the executable.
 */
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { loadTemplate, templateCacheFile } from "./db/engine/pgdataTemplate.ts";
import { createLogger } from "./log.ts";
import { bunPgliteFiles as pgliteFiles, WORKER_ENTRY } from "./runtime/bunFiles.ts";
import { prebuiltWidgetModule, widgetDistDir } from "./widget/assets.ts";
import { writeWidget } from "./widget/build.ts";

const root = join(import.meta.dir, "..");
const outfile = process.env.BUILD_OUTFILE ?? join(root, "dist", "voice-service");
const log = createLogger("info");

const started = performance.now();
await writeWidget({ ifStale: true });
await loadTemplate(pgliteFiles, log); // makes and caches the template when it is missing
const template = templateCacheFile(pgliteFiles);
if (!template || !existsSync(template)) throw new Error("the data directory template could not be cached");

mkdirSync(join(outfile, ".."), { recursive: true });
const result = await Bun.build({
  // The embedded database's thread is an entry of its own, found by its path from `root`
  // (runtime/bunFiles.ts starts it).
  entrypoints: [join(root, "src", "main.ts"), join(root, WORKER_ENTRY), template],
  root,
  compile: {
    outfile,
    // The executable is configured by its environment only: a bunfig.toml in the working folder
    // could otherwise preload code into it.
    autoloadBunfig: false,
  },
  minify: true,
  bytecode: true,
  // The widget is built now and carried as a module, so the executable serves it without sources.
  files: { [join(root, "src", "widget", "prebuilt.ts")]: await prebuiltWidgetModule(widgetDistDir()) },
});
if (!result.success) {
  for (const message of result.logs) console.error(message);
  process.exit(1);
}
const size = statSync(outfile).size;
log.info("built", {
  outfile,
  megabytes: Math.round(size / 1_048_576),
  seconds: Math.round((performance.now() - started) / 100) / 10,
});
