/**
 * `npm run bench:widget`: sizes of the served widget files (minified, gzip -9, brotli 11) and the
 * time to build and compress them from the sources, as `npm run build:widget` does.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readBuiltWidget } from "../../src/widget/assets.ts";
import { buildWidgetFiles, writeWidget } from "../../src/widget/build.ts";

const outDir = join(mkdtempSync(join(tmpdir(), "vs-widget-")), "dist");
const t0 = performance.now();
await buildWidgetFiles();
const buildMs = performance.now() - t0;
const t1 = performance.now();
await writeWidget({ outDir });
const totalMs = performance.now() - t1;
const assets = await readBuiltWidget(outDir);
rmSync(join(outDir, ".."), { recursive: true, force: true });

const rows = Object.entries(assets).map(([name, a]) => ({
  file: name,
  minified: a.bodies.identity.byteLength,
  gzip: a.bodies.gzip.byteLength,
  brotli: a.bodies.br.byteLength,
}));
console.table(rows);
console.log(
  JSON.stringify({
    bench: "widget-size",
    files: rows,
    v1GzipTargetBytes: 10 * 1024,
    v1GzipWithinTarget: (rows.find((r) => r.file === "v1.js")?.gzip ?? Infinity) <= 10 * 1024,
    buildMs: Math.round(buildMs),
    buildAndCompressMs: Math.round(totalMs),
  }),
);
