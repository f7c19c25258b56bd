import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { blockNumber } from "../../services/blockedNumbers.ts";
import { BlockedNumberInput, BlockedNumberSchema } from "./schema.ts";

export function registerCreateBlockedNumber(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/blocked-numbers",
    tags: ["Blocked numbers"],
    operationId: "createBlockedNumber",
    summary: "Block a number",
    description:
      "Adds a number to the organization's do-not-call list, in the key's mode: 201 with the new entry. A " +
      "number already listed in that mode answers 200 with the existing entry, unchanged (concurrent " +
      "requests all get the one entry). Live entries apply to live phone calls, tasks and campaigns " +
      "(403 `number_blocked`); test entries are consulted by nothing (test calls apply no calling rule).",
    ...secretKeyAuth(deps, "calls:write"),
    request: {
      body: { required: true, content: { "application/json": { schema: BlockedNumberInput } } },
    },
    responses: {
      200: {
        description: "The number was already listed: its entry.",
        content: { "application/json": { schema: BlockedNumberSchema } },
      },
      201: {
        description: "The new entry.",
        content: { "application/json": { schema: BlockedNumberSchema } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "missing_scope",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const { entry, created } = await blockNumber(deps, c.get("auth"), c.req.valid("json"));
    return created ? c.json(entry, 201) : c.json(entry, 200);
  });
}
