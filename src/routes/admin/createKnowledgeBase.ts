import { createRoute } from "@hono/zod-openapi";
import type { App, Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import { createKnowledgeBase, KnowledgeBaseInput } from "../../services/tenancy.ts";
import { ADMIN_NOTE, adminSecurity, requireAdminToken } from "./auth.ts";
import { idParams, jsonRequest, KnowledgeBaseSchema } from "./schemas.ts";

export function registerAdminCreateKnowledgeBase(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/admin/v1/organizations/{id}/knowledge-bases",
    tags: ["Admin"],
    summary: "Create a knowledge base",
    description: `Creates an empty knowledge base in the organization; documents are added with \`POST /api/v1/knowledge-bases/{id}/documents\`. ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [requireAdminToken(deps)] as const,
    request: {
      params: idParams("org", "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"),
      ...jsonRequest(KnowledgeBaseInput),
    },
    responses: {
      201: {
        description: "The knowledge base.",
        content: { "application/json": { schema: KnowledgeBaseSchema } },
      },
      ...errorResponses(
        "invalid_request",
        "invalid_key",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
      ),
    },
  });
  app.openapi(route, async (c) => {
    const kb = await createKnowledgeBase(deps, c.req.valid("param").id, c.req.valid("json"));
    return c.json(kb, 201);
  });
}
