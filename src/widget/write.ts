/**
 * `npm run build:widget [--if-stale] [dir]`: builds the widget into widget/dist/ (or `dir`), where the
 * server reads it. `--if-stale` builds only when the output is missing or was made from other sources:
 * `npm start` and `npm run start:deno` run it so, before serving. Logs one JSON line when it builds.
 */
import process from "node:process";
import { createLogger } from "../log.ts";
import { widgetDistDir } from "./assets.ts";
import { writeWidget } from "./build.ts";

const args = process.argv.slice(2);
const ifStale = args.includes("--if-stale");
const outDir = args.find((a) => !a.startsWith("--")) ?? widgetDistDir();
const started = performance.now();
if (await writeWidget({ outDir, ifStale })) {
  createLogger("info").info("widget built", { outDir, ms: Math.round(performance.now() - started) });
}
