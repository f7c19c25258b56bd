import type { Context } from "hono";
import type { Deps } from "../../deps.ts";
import type { App, AppEnv } from "../../http/appEnv.ts";
import { chooseEncoding, matchesEtag } from "../../http/contentNegotiation.ts";
import type { WidgetFiles } from "../../widget/assets.ts";
import { type WidgetAsset, widgetAssets } from "../../widget/assets.ts";

/** Any page may load the widget: it is public code, cached five minutes, revalidated by ETag. */
const COMMON_HEADERS = {
  "Content-Type": "text/javascript; charset=utf-8",
  "Access-Control-Allow-Origin": "*",
  "Cache-Control": "public, max-age=300",
  "Cross-Origin-Resource-Policy": "cross-origin",
  "X-Content-Type-Options": "nosniff",
  Vary: "Accept-Encoding",
};

/** `GET /widget/v1.js` and `GET /widget/v1/media.js`; HEAD is answered alike. */
export function registerWidget(app: App, deps: Deps) {
  const files: Record<string, keyof WidgetFiles> = {
    "/widget/v1.js": "v1.js",
    "/widget/v1/media.js": "v1/media.js",
  };
  for (const [path, name] of Object.entries(files)) {
    app.get(path, async (c) => serveAsset(c, (await widgetAssets(deps.log))[name]));
  }
}

function serveAsset(c: Context<AppEnv>, asset: WidgetAsset): Response {
  const encoding = chooseEncoding(c.req.header("accept-encoding"));
  const headers = new Headers(COMMON_HEADERS);
  headers.set("ETag", asset.etags[encoding]);
  if (encoding !== "identity") headers.set("Content-Encoding", encoding);
  if (matchesEtag(c.req.header("if-none-match"), Object.values(asset.etags))) {
    return new Response(null, { status: 304, headers });
  }
  const body = asset.bodies[encoding];
  headers.set("Content-Length", String(body.byteLength));
  return new Response(c.req.method === "HEAD" ? null : body, { status: 200, headers });
}
