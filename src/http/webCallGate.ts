import type { MiddlewareHandler } from "hono";
import type { Deps } from "../deps.ts";
import { ApiError, errorResponse } from "../errors.ts";
import { rateLimitHit, WEB_CALL_RATE_LIMIT, WebCallRateLimit } from "../services/rateLimit.ts";
import type { AppEnv } from "./appEnv.ts";
import { clientAddressResolver, rateLimitKey } from "./clientAddress.ts";
import { webCallCors } from "./cors.ts";

/**
 * What runs on `POST /api/v1/web-calls` around the route: CORS (so every answer carries it), then the
 * per-address rate limit, which counts every request reaching the route, malformed or not, and
 * decides first. IPv6 visitors are counted per /64 (`rateLimitKey`). Mount it ahead of the body middleware:
 * `app.use("/api/v1/web-calls", ...webCallGate(deps))`.
 *
 * The gate makes the request's hit (a `WebCallRateLimit`, services/rateLimit.ts) and leaves the
 * counting to the route, which counts it before anything it does has an effect, or inside the
 * statement that does it. After an answer given without counting it (malformed body, unknown
 * credential …: answers with no effect), the gate counts it, and a refusal replaces that answer.
 */
export function webCallGate(deps: Pick<Deps, "sql" | "clock" | "env">): MiddlewareHandler<AppEnv>[] {
  const clientAddress = clientAddressResolver(deps.env.TRUST_PROXY);
  const rateLimit: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (c.req.method !== "POST") return next();
    const limit = new WebCallRateLimit(
      rateLimitHit(deps.sql, deps.clock, rateLimitKey(clientAddress(c)), WEB_CALL_RATE_LIMIT),
    );
    c.set("webCallRateLimit", limit);
    await next();
    if (limit.isCounted) return;
    try {
      await limit.settle();
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      c.res = errorResponse(c, err);
    }
  };
  return [webCallCors(), rateLimit];
}
