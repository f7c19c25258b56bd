import type { Context, MiddlewareHandler } from "hono";
import { concatBytes } from "../bytes.ts";
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
 *
 * This middleware reads nothing: it prepares the reading, which happens when the route asks for it
 * (`readBody`), after its credential is accepted (http/secretKey.ts, routes/admin/auth.ts), so an
 * anonymous request never makes the server read or parse a byte. Whatever reads the body without
 * asking first (a validator, `c.req.json()`) still goes through the same bounded reader.
 */
export function jsonBody(limitFor: (path: string) => number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const method = c.req.method;
    if (method !== "POST" && method !== "PUT" && method !== "PATCH") return next();
    let reading: Promise<ArrayBuffer> | undefined;
    const read = () => {
      reading ??= readJson(c, limitFor(c.req.path));
      return reading;
    };
    c.set("readBody", read);
    // Hono reads every body through this cache; until `read` replaces the entry with the bytes, any
    // read goes through it (a thenable, so that nothing is read until someone awaits it).
    const cache = c.req.bodyCache as BodyPromises;
    // biome-ignore lint/suspicious/noThenProperty: a lazy promise; a real one would start reading now.
    cache.arrayBuffer = { then: (ok, ko) => read().then(ok, ko) } as Promise<ArrayBuffer>;
    return next();
  };
}

/** Reads and checks the body prepared by `jsonBody`, at most once; nothing on other methods. */
export async function readJsonBody(c: Context<AppEnv>): Promise<void> {
  await c.get("readBody")?.();
}

/** Route middleware: the body is read and checked here, after the middleware before it accepted the request. */
export const readBody: MiddlewareHandler<AppEnv> = async (c, next) => {
  await readJsonBody(c);
  await next();
};

async function readJson(c: Context<AppEnv>, limit: number): Promise<ArrayBuffer> {
  const length = c.req.header("content-length");
  const declared = Number(length ?? "0");
  if (declared > limit) throw tooLarge(limit);
  const raw = await readAtMost(c.req.raw, limit, length !== undefined);
  const buffer = raw.buffer as ArrayBuffer;
  const cache = c.req.bodyCache as BodyPromises;
  cache.arrayBuffer = Promise.resolve(buffer);
  const type = c.req.header("content-type");
  if (raw.byteLength === 0 && !type) return buffer;
  if (!type || !JSON_TYPE.test(type)) {
    throw new ApiError(
      "unsupported_media_type",
      "Send the body as JSON with `Content-Type: application/json`.",
    );
  }
  if (raw.byteLength === 0) return buffer;
  let text: string;
  let value: unknown;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(raw);
    value = JSON.parse(text);
  } catch {
    throw new ApiError("invalid_request", "The body is not valid JSON.");
  }
  // PostgreSQL text cannot hold U+0000, its JSON no lone surrogate (a `\ud800` escape without its pair:
  // not Unicode text), and no body needs more than MAX_JSON_DEPTH levels (the checks that follow, ours
  // and the validators', walk it): all refused here, once for every route, before anything is stored.
  const look = { nul: text.includes("\\u0000"), surrogate: SURROGATE_ESCAPE.test(text) };
  const problem =
    look.nul || look.surrogate || openings(text) > MAX_JSON_DEPTH ? firstProblem(value, look) : null;
  if (problem) {
    throw new ApiError("invalid_request", problem.message, {
      ...(problem.path ? { param: problem.path } : {}),
    });
  }
  cache.text = Promise.resolve(text);
  return buffer;
}

/** How deep a body may nest objects and arrays; the body itself is level 1. */
export const MAX_JSON_DEPTH = 64;

interface Visit {
  value: unknown;
  depth: number;
  parent: Visit | null;
  key: string;
}

/** An escape of a UTF-16 surrogate in JSON text: a body without one cannot hold a lone surrogate. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The first object or array nested deeper than MAX_JSON_DEPTH, or the first string or key that is not
 * storable text (U+0000 when `nul`, a lone surrogate when `surrogate`), in document order, with where
 * it is as a dotted path ("" for the top level). Walks with a stack of its own, so no nesting can
 * overflow the call stack, and builds a path only for what it reports.
 */
function firstProblem(
  root: unknown,
  look: { nul: boolean; surrogate: boolean },
): { message: string; path: string } | null {
  const textProblem = (t: string) =>
    look.nul && t.includes("\0")
      ? NUL_MESSAGE
      : look.surrogate && LONE_SURROGATE.test(t)
        ? SURROGATE_MESSAGE
        : null;
  const stack: Visit[] = [{ value: root, depth: 1, parent: null, key: "" }];
  for (let visit = stack.pop(); visit; visit = stack.pop()) {
    const { value, depth } = visit;
    const inKey = textProblem(visit.key);
    if (inKey) return { message: inKey, path: pathOf(visit) };
    if (typeof value === "string") {
      const inText = textProblem(value);
      if (inText) return { message: inText, path: pathOf(visit) };
      continue;
    }
    if (typeof value !== "object" || value === null) continue;
    if (depth > MAX_JSON_DEPTH) {
      return { message: `The body must not nest more than ${MAX_JSON_DEPTH} levels.`, path: pathOf(visit) };
    }
    const entries = Object.entries(value);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, item] = entries[i]!;
      stack.push({ value: item, depth: depth + 1, parent: visit, key });
    }
  }
  return null;
}

/** How many `{` and `[` the text holds (in strings too): a bound on its depth that costs one scan. */
function openings(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x7b || code === 0x5b) n++;
  }
  return n;
}

const NUL_MESSAGE = "Text must not contain the NUL character (\\u0000).";
const SURROGATE_MESSAGE =
  "Text must be Unicode: a lone surrogate (\\ud800 to \\udfff without its pair) is not a character.";

function pathOf(visit: Visit): string {
  const keys: string[] = [];
  for (let v: Visit | null = visit; v?.parent; v = v.parent) keys.push(v.key);
  return keys.reverse().join(".");
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
  return concatBytes(chunks, total);
}

function tooLarge(limit: number): ApiError {
  return new ApiError("payload_too_large", `The body must not exceed ${limit} bytes.`);
}
