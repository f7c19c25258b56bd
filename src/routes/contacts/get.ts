import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { getContact } from "../../services/contacts.ts";
import { ContactIdParams, ContactSchema } from "./schema.ts";

export function registerGetContact(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/contacts/{id}",
    tags: ["Contacts"],
    operationId: "getContact",
    summary: "Retrieve a contact",
    ...secretKeyAuth(deps, "contacts:read"),
    request: { params: ContactIdParams },
    responses: {
      200: { description: "The contact.", content: { "application/json": { schema: ContactSchema } } },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    return c.json(await getContact(deps, auth.organizationId, c.req.valid("param").id), 200);
  });
}
