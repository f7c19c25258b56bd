import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./appEnv.ts";

/**
 * CORS for `POST /api/v1/web-calls`, the only API route a web page calls: the
 * preflight allows any origin, since a session token works from any website, and every answer,
 * errors included, names the request's origin so the widget can read the error code. The publishable
 * key's own list of websites is enforced by the route itself (403 `origin_not_allowed`), not here.
 *
 * Mount it before the body middleware, so answers that never reach the route (415, 413, malformed
 * JSON) carry the headers too. Secret-key routes get no CORS at all.
 */
export function webCallCors(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const origin = c.req.header("origin");
    if (c.req.method === "OPTIONS") {
      c.header("Access-Control-Allow-Origin", origin || "*");
      c.header("Access-Control-Allow-Methods", "POST");
      c.header("Access-Control-Allow-Headers", "content-type");
      c.header("Access-Control-Max-Age", "600");
      c.header("Vary", "Origin");
      return c.body(null, 204);
    }
    await next();
    if (origin) c.res.headers.set("Access-Control-Allow-Origin", origin);
    c.res.headers.append("Vary", "Origin");
    // Lets the widget read how long to wait after a 429 and quote the request id.
    c.res.headers.set("Access-Control-Expose-Headers", "Retry-After, X-Request-Id");
  };
}
