import type { MiddlewareHandler } from "hono";
import type { AppEnv, Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { hitRateLimit, WEB_CALL_RATE_LIMIT } from "../services/rateLimit.ts";
import { clientAddressResolver } from "./clientAddress.ts";
import { webCallCors } from "./cors.ts";

/**
 * What runs on `POST /api/v1/web-calls` before anything reads the body: CORS (so every answer carries
 * it), then the per-address rate limit, which counts every request reaching the route, malformed or
 * not (CONTRACT.md §4, §8). Mount it ahead of the body middleware:
 * `app.use("/api/v1/web-calls", ...webCallGate(deps))`.
 */
export function webCallGate(deps: Pick<Deps, "sql" | "clock" | "env">): MiddlewareHandler<AppEnv>[] {
  const clientAddress = clientAddressResolver(deps.env.TRUST_PROXY);
  const rateLimit: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (c.req.method !== "POST") return next();
    const decision = await hitRateLimit(deps.sql, deps.clock, clientAddress(c), WEB_CALL_RATE_LIMIT);
    if (!decision.allowed) {
      throw new ApiError("rate_limited", "Too many web calls from this address. Try again later.", {
        headers: { "Retry-After": String(decision.retryAfterSeconds) },
      });
    }
    await next();
  };
  return [webCallCors(), rateLimit];
}
