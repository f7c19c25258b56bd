import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import swaggerUiCss from "swagger-ui-dist/swagger-ui.css" with { type: "text" };
import swaggerUiBundle from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "text" };
import initScript from "./init.js" with { type: "text" };

/**
 * The files of the /api/docs page. They are imports, not reads from node_modules, so the single
 * executable carries them and the page never depends on a CDN. Each is served under a name that
 * contains a hash of its content, so browsers may keep it for a year.
 */
export interface DocsAsset {
  /** Served name, e.g. `swagger-ui-bundle.3f2a9c1b7e40.js`. */
  file: string;
  contentType: string;
  etag: string;
  body: Uint8Array<ArrayBuffer>;
  /** Compressed once, on first request. */
  gzipped(): Uint8Array<ArrayBuffer>;
}

export interface DocsAssets {
  script: DocsAsset;
  style: DocsAsset;
  init: DocsAsset;
  byFile: Map<string, DocsAsset>;
}

let loaded: DocsAssets | undefined;

/** Hashing 2 MB takes a few milliseconds: done on the first docs request, not at import. */
export function docsAssets(): DocsAssets {
  if (loaded) return loaded;
  const script = asset("swagger-ui-bundle", "js", swaggerUiBundle);
  const style = asset("swagger-ui", "css", swaggerUiCss);
  const init = asset("docs", "js", initScript);
  loaded = { script, style, init, byFile: new Map([script, style, init].map((a) => [a.file, a])) };
  return loaded;
}

const CONTENT_TYPES = { js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8" } as const;

function asset(name: string, ext: keyof typeof CONTENT_TYPES, text: string): DocsAsset {
  // The source maps are not shipped; a dangling reference would only produce 404s in devtools.
  const body = new TextEncoder().encode(
    text.replace(/\n?\/[/*][#@] sourceMappingURL=\S+?(\s*\*\/)?\s*$/, "\n"),
  );
  const hash = createHash("sha256").update(body).digest("hex").slice(0, 12);
  let gz: Uint8Array<ArrayBuffer> | undefined;
  return {
    file: `${name}.${hash}.${ext}`,
    contentType: CONTENT_TYPES[ext],
    etag: `"${hash}"`,
    body,
    gzipped: () => {
      gz ??= new Uint8Array(gzipSync(body, { level: 9 }));
      return gz;
    },
  };
}
