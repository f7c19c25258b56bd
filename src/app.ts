import type { Hook } from "@hono/zod-openapi";
import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Deps } from "./deps.ts";
import {
  ApiError,
  describeIssues,
  errorResponse,
  notFound,
  onError,
  thrownValuesAsErrors,
} from "./errors.ts";
import type { AppEnv } from "./http/appEnv.ts";
import { bodyLimit, jsonBody } from "./http/body.ts";
import { allowedMethods, noRouteError } from "./http/methodNotAllowed.ts";
import { requestContext } from "./http/requestId.ts";
import { webCallGate } from "./http/webCallGate.ts";
import { registerDocs } from "./routes/docs/index.ts";
import { routes } from "./routes/index.ts";

/**
 * Validation failures in the one envelope: query → `invalid_query`, path → `not_found`
 * (a malformed id is just an unknown id), body and headers → `invalid_request`.
 * PostgreSQL text cannot hold U+0000: a NUL in any query or path value is refused here, before the
 * route's own schema is consulted, for every route at once (bodies: http/body.ts). A decoded value
 * holds a NUL only if the URL carries `%00` (a raw control character arrives percent-encoded), so a
 * request without it is not scanned.
 */
export const defaultHook: Hook<unknown, AppEnv, string, unknown> = (result, c) => {
  const target = (result as { target?: string }).target;
  if (c.req.url.includes("%00")) refuseNul(c, target);
  if (result.success) return;
  const { message, param } = describeIssues(result.error.issues);
  if (target === "query") throw new ApiError("invalid_query", message, param ? { param } : {});
  // An id in the path that is malformed is just an unknown id: the same 404, naming no parameter.
  if (target === "param") throw notFound("object");
  return errorResponse(c, new ApiError("invalid_request", message, param ? { param } : {}));
};

/** A NUL in a query value: 400 naming it; in a path value: 404, as any malformed id. */
function refuseNul(c: Context<AppEnv>, target: string | undefined): void {
  if (target === "query") {
    const param = Object.entries(c.req.queries()).find(([, values]) => values.some(hasNul))?.[0];
    if (param !== undefined) throw new ApiError("invalid_query", `${param} ${NUL_MESSAGE}`, { param });
  }
  if (target === "param" && Object.values(c.req.param() as Record<string, string>).some(hasNul)) {
    throw notFound("object");
  }
}

const NUL_MESSAGE = "must not contain the NUL character (%00).";
const hasNul = (value: string) => value.includes("\0");

export function createApp(deps: Deps) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook });
  app.use("*", requestContext(deps));
  // CORS and the per-address limit of web calls, before the body is read (see http/webCallGate.ts).
  app.use("/api/v1/web-calls", ...webCallGate(deps));
  app.use("*", thrownValuesAsErrors);
  // Prepares the bounded body reader; a route reads the body once its credential is accepted.
  app.use("/api/*", jsonBody(bodyLimit));
  for (const register of routes) register(app, deps);
  registerDocs(app);
  // Without ADMIN_TOKEN the admin API does not exist: its paths are unknown, not "another method".
  const allowed = allowedMethods(app.routes, {
    hidden: (path) => !deps.env.ADMIN_TOKEN && path.startsWith("/api/admin/"),
  });
  app.notFound((c) => errorResponse(c, noRouteError(c, allowed)));
  app.onError(onError(deps.log));
  return app;
}
