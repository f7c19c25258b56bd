import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { createContact } from "../../services/contacts.ts";
import { ContactInputSchema, ContactSchema } from "./schema.ts";

export function registerCreateContact(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/contacts",
    tags: ["Contacts"],
    operationId: "createContact",
    summary: "Create a contact",
    description:
      "Creates a contact of the organization and emits `contact.created`. Contacts are real data in both modes: " +
      "with a test key the contact really is created, and the event carries `livemode` false.",
    ...secretKeyAuth(deps, "contacts:write"),
    request: {
      body: { required: true, content: { "application/json": { schema: ContactInputSchema } } },
    },
    responses: {
      201: {
        description: "The contact.",
        content: { "application/json": { schema: ContactSchema } },
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
    const auth = c.get("auth");
    const contact = await createContact(deps, auth, c.req.valid("json"));
    return c.json(contact, 201);
  });
}
