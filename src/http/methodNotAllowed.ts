import type { Context } from "hono";
import { TrieRouter } from "hono/router/trie-router";
import { ApiError } from "../errors.ts";

/**
 * The methods a path is served with, from the routes the app registered (`app.routes`): a request
 * that found no route is 405 `method_not_allowed` with `Allow` when its path is served with other
 * methods, and 404 otherwise. Paths match as the router matches them (`/api/v1/calls/:id` matches
 * any id). HEAD is allowed wherever GET is (the router answers it with the GET route).
 */

interface RouteLike {
  method: string;
  path: string;
}

const ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

export function allowedMethods(
  routes: readonly RouteLike[],
  opts: { hidden?: (path: string) => boolean } = {},
): (path: string) => string[] {
  let built: { count: number; router: TrieRouter<string> } | null = null;
  return (path) => {
    // Built at the first unmatched request, and again if routes were added since.
    if (built?.count !== routes.length) {
      const router = new TrieRouter<string>();
      for (const r of routes) {
        // Middleware is registered for every method ("ALL"); it serves no path by itself.
        if (r.method === "ALL" || opts.hidden?.(r.path)) continue;
        // Each route under every method, its own method as the value: one match lists them all.
        router.add("ALL", r.path, r.method.toUpperCase());
      }
      built = { count: routes.length, router };
    }
    const methods = new Set(built.router.match("GET", path)[0].map(([method]) => method));
    if (methods.has("GET")) methods.add("HEAD");
    return [...methods].sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b));
  };
}

/** The answer to a request no route matched: 405 with `Allow` for a known path, else 404. */
export function noRouteError(c: Context, allowed: (path: string) => string[]): ApiError {
  const methods = allowed(c.req.path);
  if (methods.length === 0) return new ApiError("not_found", `No route ${c.req.method} ${c.req.path}.`);
  const allow = methods.join(", ");
  return new ApiError(
    "method_not_allowed",
    `${c.req.method} is not allowed on ${c.req.path}; use ${allow}.`,
    {
      headers: { Allow: allow },
    },
  );
}
