import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Sql } from "postgres";
import type { SecretKeyAuth } from "./auth/secretKey.ts";
import type { Clock } from "./clock.ts";
import type { Env } from "./env.ts";
import type { Logger } from "./log.ts";
import type { WebCallRateLimit } from "./services/rateLimit.ts";
import type { TimerScheduler } from "./timers/scheduler.ts";

/** Everything the app needs from outside. createApp(deps) has no side effects of its own. */
export interface Deps {
  sql: Sql;
  clock: Clock;
  log: Logger;
  env: Env;
  /** Where services write timers; the process's TimerRunner when it runs one (see timers/scheduler.ts). */
  timers?: TimerScheduler;
}

/** Hono typing: the runtime adapter passes the socket peer address; middleware sets the variables. */
export interface AppEnv {
  Bindings: { remoteAddress?: string };
  Variables: {
    requestId: string;
    auth: SecretKeyAuth;
    /** The request's rate-limit hit on `POST /api/v1/web-calls`, counted once (http/webCallGate.ts). */
    webCallRateLimit: WebCallRateLimit;
  };
}

export type App = OpenAPIHono<AppEnv>;
