import { createRoute } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Deps } from "../../deps.ts";
import { ApiError, describeIssues, errorResponses } from "../../errors.ts";
import type { App, AppEnv } from "../../http/appEnv.ts";
import { readBody } from "../../http/body.ts";
import { clientAddressResolver } from "../../http/clientAddress.ts";
import {
  refuseMalformedAttempt,
  startWithPublishableKey,
  startWithSessionToken,
} from "../../services/webCalls.ts";
import { StartWebCallBody, WebCallStartSchema } from "./schema.ts";

/**
 * POST /api/v1/web-calls: the one API route a web page calls. CORS and the per-address rate limit run
 * before it (http/webCallGate.ts, mounted in app.ts), so malformed requests count and carry CORS too.
 */

export function registerStartWebCall(app: App, deps: Deps) {
  const clientAddress = clientAddressResolver(deps.env.TRUST_PROXY);
  const route = createRoute({
    method: "post",
    path: "/api/v1/web-calls",
    tags: ["Web calls"],
    operationId: "startWebCall",
    summary: "Start a web call",
    description:
      "Starts a browser web call, from a page. Two forms: `{publishableKey, captchaToken}`, accepted only " +
      "from a website (`Origin`, exact scheme, host and port) in the key's list, to the key's agent, within " +
      "its monthly minute cap; or `{sessionToken}` from any website, with a token minted by " +
      "`POST /api/v1/web-call-sessions`. Answers carry CORS headers for the request's origin. At most 6 " +
      "requests per 10 minutes per client address, IPv6 addresses counted per /64 (every request counts, " +
      "malformed ones included).\n\n" +
      "Order of checks, publishable form: rate limit → key (401) → origin (403) → bot check (400) → paid " +
      "plan (403) → agent (503) → plan minutes (403) → key cap (429) → start. Session form: rate limit → " +
      "token (401) → paid plan (live only) → agent → plan minutes → start. A refusal leaves a session token " +
      "valid; a failure while starting (502) spends it. Without a configured media server, live calls are " +
      "503 `agent_unavailable`. Credentials in the query string are ignored.",
    // Public: a web page calls it with a publishable key or a session token in the body, no header.
    security: [],
    // No credential to check first: the gate (CORS, the rate limit) ran, then the body is read (64 KiB).
    middleware: [readBody] as const,
    request: {
      body: { required: true, content: { "application/json": { schema: StartWebCallBody } } },
    },
    responses: {
      201: {
        description: "The call started: a room to join (live) or a simulated call (test session token).",
        content: { "application/json": { schema: WebCallStartSchema } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_captcha",
        "invalid_key",
        "invalid_session_token",
        "origin_not_allowed",
        "plan_required",
        "plan_minutes_exhausted",
        "rate_limited",
        "minute_cap_reached",
        "payload_too_large",
        "unsupported_media_type",
        "call_start_failed",
        "agent_unavailable",
      ),
    },
  });
  // A malformed body is refused like any other, and counted in the abuse view of the publishable key it
  // carries, if any (an attempt with that key like the others).
  const refuse = (c: Context<AppEnv>, publishableKey: unknown, refusal: ApiError) =>
    refuseMalformedAttempt(
      deps,
      { publishableKey, origin: c.req.header("origin") },
      c.get("webCallRateLimit"),
      refusal,
    );
  app.openapi(
    route,
    async (c) => {
      const body = c.req.valid("json");
      const hasSession = body.sessionToken !== undefined;
      const hasKey = body.publishableKey !== undefined || body.captchaToken !== undefined;
      if (hasSession === hasKey) {
        return refuse(
          c,
          body.publishableKey,
          new ApiError(
            "invalid_request",
            "Send either publishableKey and captchaToken, or sessionToken alone.",
          ),
        );
      }
      // The request's rate-limit hit: counted by the statement that redeems the token, or first thing by
      // the publishable form (http/webCallGate.ts).
      const rateLimit = c.get("webCallRateLimit");
      if (hasSession) {
        return c.json(await startWithSessionToken(deps, body.sessionToken, rateLimit), 201);
      }
      if (body.publishableKey === undefined) {
        throw new ApiError("invalid_request", "publishableKey is required with captchaToken.", {
          param: "publishableKey",
        });
      }
      const started = await startWithPublishableKey(
        deps,
        {
          publishableKey: body.publishableKey,
          captchaToken: body.captchaToken,
          origin: c.req.header("origin"),
          remoteIp: clientAddress(c),
        },
        rateLimit,
      );
      return c.json(started, 201);
    },
    // The route's one validator is the body's; this hook stands in for the app's default one.
    (result, c) => {
      if (result.success) return;
      const { message, param } = describeIssues(result.error.issues);
      const raw = (result as { data?: unknown }).data;
      const presented =
        typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>).publishableKey : undefined;
      return refuse(c, presented, new ApiError("invalid_request", message, param ? { param } : {}));
    },
  );
}
