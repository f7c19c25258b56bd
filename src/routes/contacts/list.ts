import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { listContacts } from "../../services/contacts.ts";
import { ContactListQuery, ContactListSchema } from "./schema.ts";

export function registerListContacts(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/contacts",
    tags: ["Contacts"],
    operationId: "listContacts",
    summary: "List contacts",
    description:
      "Lists the contacts of the organization (the same in both modes), newest first, with the cursor convention.",
    ...secretKeyAuth(deps, "contacts:read"),
    request: { query: ContactListQuery },
    responses: {
      200: {
        description: "One page of contacts.",
        content: { "application/json": { schema: ContactListSchema } },
      },
      ...errorResponses("invalid_query", "invalid_cursor", "invalid_key", "missing_scope"),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    return c.json(await listContacts(deps, auth.organizationId, c.req.valid("query")), 200);
  });
}
