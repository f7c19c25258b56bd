import type { MiddlewareHandler } from "hono";
import { ApiError } from "../errors.ts";
import type { AppEnv } from "./appEnv.ts";

export const BODY_LIMIT = 64 * 1024;
export const LARGE_BODY_LIMIT = 1024 * 1024;

/** Paths whose bodies carry long texts: knowledge-base documents and the results of a call (its transcript). */
const LARGE_BODY_PATH = /\/knowledge-bases\/[^/]+\/documents$|\/calls\/[^/]+\/results$/;

/** The body limit of a path: 1 MiB for knowledge-base documents and call results, 64 KiB everywhere else. */
export function bodyLimit(path: string): number {
  return LARGE_BODY_PATH.test(path) ? LARGE_BODY_LIMIT : BODY_LIMIT;
}

/** Content types read as JSON: application/json and the `+json` family (LiveKit sends webhook+json). */
const JSON_TYPE = /^application\/([a-z0-9.-]+\+)?json\s*(;|$)/i;

/**
 * The one gate for request bodies on write methods: 415 without a JSON content type, 413 over the
 * limit (on Content-Length, and on the bytes actually read, so a chunked body is cut off at the limit
 * instead of being buffered whole), 400 for malformed JSON.
 * The raw bytes and the text stay cached in the request: signature checks read the exact bytes,
 * the route validators parse the text.
 */
export function jsonBody(limitFor: (path: string) => number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const method = c.req.method;
    if (method !== "POST" && method !== "PUT" && method !== "PATCH") return next();
    const limit = limitFor(c.req.path);
    const length = c.req.header("content-length");
    const declared = Number(length ?? "0");
    if (declared > limit) throw tooLarge(limit);
    const raw = await readAtMost(c.req.raw, limit, length !== undefined);
    const cache = c.req.bodyCache as BodyPromises;
    cache.arrayBuffer = Promise.resolve(raw.buffer as ArrayBuffer);
    const type = c.req.header("content-type");
    if (raw.byteLength === 0 && !type) return next();
    if (!type || !JSON_TYPE.test(type)) {
      throw new ApiError(
        "unsupported_media_type",
        "Send the body as JSON with `Content-Type: application/json`.",
      );
    }
    if (raw.byteLength === 0) return next();
    let text: string;
    let value: unknown;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(raw);
      value = JSON.parse(text);
    } catch {
      throw new ApiError("invalid_request", "The body is not valid JSON.");
    }
    // PostgreSQL text cannot hold U+0000: refused here, once for every route, rather than a 500 later.
    const nul = text.includes("\\u0000") ? pathOfNul(value, "") : null;
    if (nul !== null) {
      throw new ApiError("invalid_request", "Text must not contain the NUL character (\\u0000).", {
        ...(nul ? { param: nul } : {}),
      });
    }
    cache.text = Promise.resolve(text);
    return next();
  };
}

/** Where a string (or a key) holding U+0000 is: a dotted path ("" for the top level), or null. */
function pathOfNul(value: unknown, path: string): string | null {
  if (typeof value === "string") return value.includes("\0") ? path : null;
  if (typeof value !== "object" || value === null) return null;
  for (const [key, item] of Object.entries(value)) {
    const at = path ? `${path}.${key}` : key;
    if (key.includes("\0")) return at;
    const found = pathOfNul(item, at);
    if (found !== null) return found;
  }
  return null;
}

/** Hono keeps promises in `bodyCache` at run time although its type names the resolved values. */
interface BodyPromises {
  arrayBuffer?: Promise<ArrayBuffer>;
  text?: Promise<string>;
}

/**
 * Reads the body, giving up (413) as soon as more than `limit` bytes have arrived. A body of declared
 * length (checked against the limit already) is read in one piece: the HTTP server reads no more than
 * Content-Length bytes, and one native read costs far less than a stream read chunk by chunk.
 */
async function readAtMost(req: Request, limit: number, declared: boolean): Promise<Uint8Array> {
  if (!req.body) return new Uint8Array(0);
  if (declared) {
    const whole = new Uint8Array(await req.arrayBuffer());
    if (whole.byteLength > limit) throw tooLarge(limit);
    return whole;
  }
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

function tooLarge(limit: number): ApiError {
  return new ApiError("payload_too_large", `The body must not exceed ${limit} bytes.`);
}
