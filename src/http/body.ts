import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../deps.ts";
import { ApiError } from "../errors.ts";

export const BODY_LIMIT = 64 * 1024;
export const DOCUMENT_BODY_LIMIT = 1024 * 1024;

/** Content types read as JSON: application/json and the `+json` family (LiveKit sends webhook+json). */
const JSON_TYPE = /^application\/([a-z0-9.-]+\+)?json\s*(;|$)/i;

/**
 * The one gate for request bodies on write methods: 415 without a JSON content type, 413 over the
 * limit (checked on the bytes actually read, not only on Content-Length), 400 for malformed JSON.
 * The parsed body stays cached in the request for the route validators.
 */
export function jsonBody(limitFor: (path: string) => number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const method = c.req.method;
    if (method !== "POST" && method !== "PUT" && method !== "PATCH") return next();
    const limit = limitFor(c.req.path);
    const declared = Number(c.req.header("content-length") ?? "0");
    if (declared > limit) throw new ApiError("payload_too_large", `The body must not exceed ${limit} bytes.`);
    const raw = await c.req.arrayBuffer();
    if (raw.byteLength > limit)
      throw new ApiError("payload_too_large", `The body must not exceed ${limit} bytes.`);
    const type = c.req.header("content-type");
    if (raw.byteLength === 0 && !type) return next();
    if (!type || !JSON_TYPE.test(type)) {
      throw new ApiError(
        "unsupported_media_type",
        "Send the body as JSON with `Content-Type: application/json`.",
      );
    }
    if (raw.byteLength === 0) return next();
    let parsed: unknown;
    try {
      parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
    } catch {
      throw new ApiError("invalid_request", "The body is not valid JSON.");
    }
    // Parsed once: the route validators read this cache instead of parsing again.
    c.req.bodyCache.json = Promise.resolve(parsed);
    return next();
  };
}
