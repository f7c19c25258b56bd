import type { MiddlewareHandler } from "hono";
import type { AppEnv, Deps } from "../deps.ts";
import { ApiError, errorResponse } from "../errors.ts";
import {
  type RateLimitHit,
  type RateLimitRow,
  rateLimitHit,
  WEB_CALL_RATE_LIMIT,
} from "../services/rateLimit.ts";
import { clientAddressResolver } from "./clientAddress.ts";
import { webCallCors } from "./cors.ts";

/**
 * What runs on `POST /api/v1/web-calls` around the route: CORS (so every answer carries it), then the
 * per-address rate limit, which counts every request reaching the route, malformed or not, and
 * decides first (CONTRACT.md §4, §8). Mount it ahead of the body middleware:
 * `app.use("/api/v1/web-calls", ...webCallGate(deps))`.
 *
 * The request's hit is counted exactly once, in one of two ways:
 * - by the route, before anything it does has an effect (`settle()`), or inside the statement that
 *   does it, so the hit and the work commit together (`inStatement()`, then `counted()` with the row);
 * - by the gate, after the route answered without counting it. That answer had no effect (malformed
 *   body, unknown credential …), so a refusal simply replaces it with 429.
 */
export class WebCallRateLimit {
  #hit: RateLimitHit;
  #counted = false;

  constructor(hit: RateLimitHit) {
    this.#hit = hit;
  }

  get isCounted(): boolean {
    return this.#counted;
  }

  /** Counts the hit alone unless it already was; throws 429 `rate_limited` when refused. */
  async settle(): Promise<void> {
    if (this.#counted) return;
    const [row] = await this.#hit.sql;
    this.counted(row!);
  }

  /** The hit's statement, for a `with` entry of a statement that then reports its row to `counted`. */
  inStatement(): RateLimitHit["sql"] {
    return this.#hit.sql;
  }

  /** Records that the hit was counted (its statement committed); throws 429 when it was refused. */
  counted(row: RateLimitRow): void {
    this.#counted = true;
    const decision = this.#hit.decide(row);
    if (!decision.allowed) throw rateLimited(decision.retryAfterSeconds);
  }
}

function rateLimited(retryAfterSeconds: number): ApiError {
  return new ApiError("rate_limited", "Too many web calls from this address. Try again later.", {
    headers: { "Retry-After": String(retryAfterSeconds) },
  });
}

export function webCallGate(deps: Pick<Deps, "sql" | "clock" | "env">): MiddlewareHandler<AppEnv>[] {
  const clientAddress = clientAddressResolver(deps.env.TRUST_PROXY);
  const rateLimit: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (c.req.method !== "POST") return next();
    const limit = new WebCallRateLimit(
      rateLimitHit(deps.sql, deps.clock, clientAddress(c), WEB_CALL_RATE_LIMIT),
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
