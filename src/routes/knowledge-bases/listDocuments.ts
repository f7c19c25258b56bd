import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { listEnvelope, listQuery } from "../../lists/cursor.ts";
import { listDocuments } from "../../services/documents.ts";
import { DocumentSchema, KnowledgeBaseIdParams } from "./schema.ts";

export function registerListDocuments(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/knowledge-bases/{id}/documents",
    tags: ["Knowledge bases"],
    operationId: "listKnowledgeBaseDocuments",
    summary: "List the documents of a knowledge base",
    description:
      "The documents of a knowledge base of the organization, newest first, cursor pagination (`limit`, " +
      "`starting_after`), without their text. Documents are live objects: with a test key the list is empty " +
      "(test uploads store nothing).",
    ...secretKeyAuth(deps, "knowledge:read"),
    request: { params: KnowledgeBaseIdParams, query: listQuery({}) },
    responses: {
      200: {
        description: "A page of documents.",
        content: { "application/json": { schema: listEnvelope(DocumentSchema, "DocumentList") } },
      },
      ...errorResponses("invalid_query", "invalid_cursor", "invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    const page = await listDocuments(deps, c.get("auth"), c.req.valid("param").id, c.req.valid("query"));
    return c.json(page, 200);
  });
}
