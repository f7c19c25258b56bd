import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { errorResponses } from "../../errors.ts";
import type { App } from "../../http/appEnv.ts";
import { secretKeyAuth } from "../../http/secretKey.ts";
import { searchKnowledgeBase } from "../../services/knowledgeBases.ts";
import { KnowledgeBaseIdParams, SearchQuery, SearchResultsSchema } from "./schema.ts";

export function registerSearchKnowledgeBase(app: App, deps: Deps) {
  const route = createRoute({
    method: "get",
    path: "/api/v1/knowledge-bases/{id}/search",
    tags: ["Knowledge bases"],
    operationId: "searchKnowledgeBase",
    summary: "Search a knowledge base",
    description:
      "The chunks of the knowledge base's documents that best match `q`, best first, for a voice agent to " +
      "answer from: PostgreSQL full-text search, with the text search configuration of the knowledge base's " +
      "`language` (`fr` → `french`, `en` → `english`, none or any other → `simple`) both for the chunks and " +
      "for `q`. A chunk matches when it holds any of the query's words (stemmed, stop words dropped, for French " +
      "and English); the more it holds, the higher its `score`. Chinese, Japanese and Korean, written without " +
      "spaces between words, are indexed and queried as overlapping pairs of characters (`说明退货政策` as `说明 " +
      "明退 退货 货政 政策`), so `退货` finds that chunk; a query of a single such character finds only chunks " +
      "where it stands alone. A ranked query, not a list: no cursor. With a test key `results` is always empty " +
      "(test documents are never stored).",
    ...secretKeyAuth(deps, "knowledge:read"),
    request: { params: KnowledgeBaseIdParams, query: SearchQuery },
    responses: {
      200: {
        description: "The best chunks.",
        content: {
          "application/json": {
            schema: SearchResultsSchema,
            example: {
              livemode: true,
              results: [
                {
                  documentId: "doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
                  title: "Opening hours",
                  chunkIndex: 1,
                  text: "On Saturdays we open from 10:00 to 13:00. We are closed on Sundays.",
                  score: 0.0759,
                },
              ],
            },
          },
        },
      },
      ...errorResponses("invalid_query", "invalid_key", "missing_scope", "not_found"),
    },
  });
  app.openapi(route, async (c) => {
    const result = await searchKnowledgeBase(
      deps,
      c.get("auth"),
      c.req.valid("param").id,
      c.req.valid("query"),
    );
    return c.json(result, 200);
  });
}
