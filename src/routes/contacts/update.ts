import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { updateContact } from "../../services/contacts.ts";
import { ContactIdParams, ContactPatchSchema, ContactSchema } from "./schema.ts";

export function registerUpdateContact(app: App, deps: Deps) {
  const route = createRoute({
    method: "patch",
    path: "/api/v1/contacts/{id}",
    tags: ["Contacts"],
    operationId: "updateContact",
    summary: "Update a contact",
    description:
      "Changes the fields sent; `null` clears `name` or `email` and empties `metadata` (which is replaced as a " +
      "whole when sent). Emits `contact.updated` when something changed, with `livemode` of the key.",
    ...secretKeyAuth(deps, "contacts:write"),
    request: {
      params: ContactIdParams,
      body: { required: true, content: { "application/json": { schema: ContactPatchSchema } } },
    },
    responses: {
      200: { description: "The contact.", content: { "application/json": { schema: ContactSchema } } },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "missing_scope",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const auth = c.get("auth");
    const contact = await updateContact(deps, auth, c.req.valid("param").id, c.req.valid("json"));
    return c.json(contact, 200);
  });
}
