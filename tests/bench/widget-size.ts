/**
 * `npm run bench:widget`: sizes of the served widget files (minified, gzip -9, brotli 11) and the
 * time to build and compress them from the sources, as the server does at start.
 */
import { widgetAssets } from "../../src/widget/assets.ts";
import { buildWidgetFiles } from "../../src/widget/build.ts";

const t0 = performance.now();
await buildWidgetFiles();
const buildMs = performance.now() - t0;
const t1 = performance.now();
const assets = await widgetAssets();
const totalMs = performance.now() - t1;

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
