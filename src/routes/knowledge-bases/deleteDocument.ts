import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { deleteDocument } from "../../services/documents.ts";
import { DeletedDocumentSchema, DocumentIdParams } from "./schema.ts";

export function registerDeleteDocument(app: App, deps: Deps) {
  const route = createRoute({
    method: "delete",
    path: "/api/v1/knowledge-bases/{id}/documents/{documentId}",
    tags: ["Knowledge bases"],
    operationId: "deleteKnowledgeBaseDocument",
    summary: "Delete a document",
    description:
      "Deletes a document and its chunks: it is no longer listed, read, or found by searches. Documents are " +
      "live objects: with a test key, and for a document of another knowledge base or organization, 404 " +
      "`not_found`.",
    ...secretKeyAuth(deps, "knowledge:write"),
    request: { params: DocumentIdParams },
    responses: {
      200: {
        description: "Deleted.",
        content: { "application/json": { schema: DeletedDocumentSchema } },
      },
      ...errorResponses("invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    const { id, documentId } = c.req.valid("param");
    return c.json(await deleteDocument(deps, c.get("auth"), id, documentId), 200);
  });
}
