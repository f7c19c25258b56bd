import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { getDocument } from "../../services/documents.ts";
import { DocumentIdParams, DocumentWithTextSchema } from "./schema.ts";

export function registerGetDocument(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/knowledge-bases/{id}/documents/{documentId}",
    tags: ["Knowledge bases"],
    operationId: "getKnowledgeBaseDocument",
    summary: "Retrieve a document",
    description:
      "One document of a knowledge base, with its `text` put back together from its chunks. Documents are " +
      "live objects: with a test key, and for a document of another knowledge base or organization, 404 " +
      "`not_found`.",
    ...secretKeyAuth(deps, "knowledge:read"),
    request: { params: DocumentIdParams },
    responses: {
      200: {
        description: "The document.",
        content: { "application/json": { schema: DocumentWithTextSchema } },
      },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    const { id, documentId } = c.req.valid("param");
    return c.json(await getDocument(deps, c.get("auth"), id, documentId), 200);
  });
}
