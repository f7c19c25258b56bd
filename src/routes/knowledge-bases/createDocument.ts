import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { addDocument, CHUNK_MAX_CHARS } from "../../services/documents.ts";
import { CreatedDocumentSchema, DocumentInputSchema, KnowledgeBaseIdParams } from "./schema.ts";

export function registerCreateDocument(app: App, deps: Deps) {
  const route = createRoute({
    method: "post",
    path: "/api/v1/knowledge-bases/{id}/documents",
    tags: ["Knowledge bases"],
    operationId: "createKnowledgeBaseDocument",
    summary: "Add a document to a knowledge base",
    description:
      "Adds a plain-text document to a knowledge base of the organization and emits " +
      "`knowledge.document_ready` with `{documentId, knowledgeBaseId, chunkCount, livemode, createdAt}`. The text is " +
      `split into chunks of at most ${CHUNK_MAX_CHARS.toLocaleString("en")} characters along paragraphs, ` +
      "sentences (Chinese and Japanese ones too, after 。！？) and words. With a test key the request is validated the same way, nothing is stored, " +
      "the answer carries `simulated: true` and a fictitious `documentId` (the document does not exist " +
      "afterwards) and the event has `livemode` false. No paid plan is needed. The body may be up to 1 MiB.",
    ...secretKeyAuth(deps, "knowledge:write"),
    request: {
      params: KnowledgeBaseIdParams,
      body: { required: true, content: { "application/json": { schema: DocumentInputSchema } } },
    },
    responses: {
      201: {
        description: "The document is ready (live), or would be (test key).",
        content: { "application/json": { schema: CreatedDocumentSchema } },
      },
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
    const ready = await addDocument(deps, c.get("auth"), c.req.valid("param").id, c.req.valid("json"));
    return c.json(ready, 201);
  });
}
