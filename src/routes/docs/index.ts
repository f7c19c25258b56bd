import type { Context } from "hono";
import { SCOPES } from "../../auth/scopes.ts";
import { ErrorBodySchema, notFound } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { chooseEncoding, matchesEtag } from "../../http/contentNegotiation.ts";
import { type DocsAsset, docsAssets } from "./assets.ts";
import { buildDocument } from "./document.ts";

/**
 * `/api/openapi.json` (OpenAPI 3.1, generated from the routes' own schemas) and `/api/docs`, the
 * API reference rendered in the browser from files this server serves itself.
 *
 * How an operation documents what it needs:
 * - `...secretKeyAuth(deps, "calls:read")`: a secret key with that one scope. It writes both the
 *   security requirement `[{ secretKey: ["calls:read"] }]` (OpenAPI 3.1 lets the array of a non-OAuth
 *   scheme name the roles an operation requires) and the middleware that enforces that same scope
 *   (tests/http/security.test.ts proves both agree, route by route).
 * - `...errorResponses(code, …)`: every error the operation can answer, with an example per code.
 *   Operations with a JSON body also list `invalid_request`, `payload_too_large` and
 *   `unsupported_media_type` (tests/http/openapi.test.ts checks this).
 */
export function registerDocs(app: App) {
  app.openAPIRegistry.registerComponent("securitySchemes", "secretKey", {
    type: "http",
    scheme: "bearer",
    description:
      "A secret key, `inf_live_…` or `inf_test_…`, sent as `Authorization: Bearer <key>`. Never place it in a web " +
      "page. Each operation names the one scope it needs in its security requirement; a key granted `*` has them " +
      `all. Scopes: ${SCOPES.map((s) => `\`${s}\``).join(", ")}. A missing, malformed, unknown or revoked key is ` +
      "401 `invalid_key`; a key without the scope is 403 `missing_scope`.",
  });

  // The one error envelope; each error response narrows its `code` (errorResponses in errors.ts).
  app.openAPIRegistry.register("Error", ErrorBodySchema);

  // The routes are fixed once the app is built: the document is generated on first use, then kept.
  let documentJson: string | undefined;
  app.get("/api/openapi.json", (c) => {
    documentJson ??= JSON.stringify(buildDocument(app));
    c.header("Cache-Control", "no-cache");
    // Public: any tool may read it, from any origin.
    c.header("Access-Control-Allow-Origin", "*");
    c.header("Content-Type", "application/json");
    return c.body(documentJson);
  });

  app.get("/api/docs", (c) => {
    const { script, style, init } = docsAssets();
    c.header("Content-Security-Policy", DOCS_CSP);
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Referrer-Policy", "no-referrer");
    c.header("Cache-Control", "no-cache");
    return c.html(docsPage(style.file, script.file, init.file));
  });

  // The page's addresses are relative to /api/docs: with a trailing slash they would miss, so redirect.
  // `../docs` is relative too, so a proxy's path prefix is kept.
  app.get("/api/docs/", (c) => c.redirect("../docs", 301));

  app.get("/api/docs/assets/:file", (c) => {
    const found = docsAssets().byFile.get(c.req.param("file"));
    if (!found) throw notFound("file");
    return serveAsset(c, found);
  });
}

/**
 * The page runs only its own files: no inline script or style, no other origin. Swagger UI sets styles
 * through the DOM (allowed by `style-src 'self'`), and its CSS embeds icons as `data:` images.
 */
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Relative addresses: `/api/docs` resolves them under `/api/`, even behind a proxy's path prefix. */
function docsPage(css: string, js: string, init: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Voice agent service API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="docs/assets/${css}">
</head>
<body>
<div id="api-reference"></div>
<script src="docs/assets/${js}"></script>
<script src="docs/assets/${init}"></script>
</body>
</html>
`;
}

function serveAsset(c: Context, asset: DocsAsset): Response {
  c.header("Content-Type", asset.contentType);
  c.header("Cache-Control", "public, max-age=31536000, immutable");
  c.header("ETag", asset.etag);
  c.header("Vary", "Accept-Encoding");
  c.header("X-Content-Type-Options", "nosniff");
  if (matchesEtag(c.req.header("if-none-match"), [asset.etag])) return c.body(null, 304);
  if (chooseEncoding(c.req.header("accept-encoding"), ["gzip", "identity"]) === "gzip") {
    c.header("Content-Encoding", "gzip");
    return c.body(asset.gzipped());
  }
  return c.body(asset.body);
}
