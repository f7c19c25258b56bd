// `npm run build:widget [dir]` writes the widget files (default widget/dist/) to inspect or serve them.
// Kept apart from build.ts: the executable bundles build.ts, and its bytecode format has no top-level await.
import { join } from "node:path";
import { buildWidgetFiles } from "./build.ts";

const outDir = process.argv[2] ?? join(import.meta.dir, "..", "..", "widget", "dist");
const files = await buildWidgetFiles();
for (const [name, text] of Object.entries(files)) await Bun.write(join(outDir, name), text);
console.log(JSON.stringify({ outDir, files: Object.keys(files) }));
