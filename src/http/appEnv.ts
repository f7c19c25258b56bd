import type { OpenAPIHono } from "@hono/zod-openapi";
import type { SecretKeyAuth } from "../auth/access.ts";
import type { Deps } from "../deps.ts";
import type { WebCallRateLimit } from "../services/rateLimit.ts";

/** Hono typing: the runtime adapter passes the socket peer address; middleware sets the variables. */
export interface AppEnv {
  Bindings: { remoteAddress?: string };
  Variables: {
    requestId: string;
    auth: SecretKeyAuth;
    /** The request's rate-limit hit on `POST /api/v1/web-calls`, counted once (http/webCallGate.ts). */
    webCallRateLimit: WebCallRateLimit;
    /** Reads and checks the request's JSON body once (http/body.ts); absent on methods without a body. */
    readBody: (() => Promise<ArrayBuffer>) | undefined;
  };
}

export type App = OpenAPIHono<AppEnv>;

/** Registers one or more routes on the app; each resource folder under routes/ exports a list of these. */
export type RouteRegistration = (app: App, deps: Deps) => void;
