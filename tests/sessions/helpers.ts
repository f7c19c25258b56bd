import type { TestContext } from "../helpers/app.ts";

export const TOKEN_RE = /^inf_wcs_[0-9A-Za-z]{43}$/;

/** POST /api/v1/web-call-sessions as a client would. */
export function mint(
  ctx: TestContext,
  key: string | undefined,
  json: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return ctx.request("/api/v1/web-call-sessions", { method: "POST", ...(key ? { key } : {}), json, headers });
}
