import type { MiddlewareHandler } from "hono";
import type { Deps } from "../deps.ts";
import type { AppEnv } from "./appEnv.ts";

/**
 * Gives every request a `req_` id (X-Request-Id on every answer) and logs one JSON line per request.
 * Only the path is logged, never the query string or headers, so no credential can reach the log.
 */
export function requestContext(deps: Pick<Deps, "log" | "ids">): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const requestId = deps.ids.next("req");
    c.set("requestId", requestId);
    const started = performance.now();
    await next();
    c.header("X-Request-Id", requestId);
    deps.log.info("request", {
      requestId,
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      ms: Math.round((performance.now() - started) * 10) / 10,
    });
  };
}
