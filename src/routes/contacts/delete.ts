import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { deleteContact } from "../../services/contacts.ts";
import { ContactIdParams, DeletedContactSchema } from "./schema.ts";

export function registerDeleteContact(app: App, deps: Deps) {
  const route = createRoute({
    method: "delete",
    path: "/api/v1/contacts/{id}",
    tags: ["Contacts"],
    operationId: "deleteContact",
    summary: "Delete a contact",
    description:
      "Deletes the contact for good and emits `contact.deleted` with data `{id, deleted: true}`. Its id then " +
      "answers 404 and is refused as a cursor (`invalid_cursor`).",
    ...secretKeyAuth(deps, "contacts:write"),
    request: { params: ContactIdParams },
    responses: {
      200: {
        description: "The contact was deleted.",
        content: { "application/json": { schema: DeletedContactSchema } },
      },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    return c.json(await deleteContact(deps, auth, c.req.valid("param").id), 200);
  });
}
