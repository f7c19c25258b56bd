import { z } from "@hono/zod-openapi";
import { type IdPrefix, isId } from "../../ids.ts";
import { listQuery } from "../../lists/cursor.ts";

/**
 * What the operators' schemas share: one validation of operator input for the admin API (which documents
 * it in the OpenAPI) and the CLI. Requests are all strict: an unknown field is an error.
 */

export const Name = z.string().trim().min(1).max(200);

export const orgId = z.string().openapi({ example: "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
export const agentId = z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
export const keyId = z.string().openapi({ example: "key_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
export const start = z
  .string()
  .openapi({ description: "The visible start of the key, for operators.", example: "inf_test_Ab3x…" });

/** The query of an admin list: the cursor convention, no filter. */
export const AdminListQuery = listQuery({});

/**
 * The `{id}` path parameter. A malformed id is refused here (404 `not_found` through the
 * default hook) so it answers the same as an unknown one, whatever the body holds.
 */
export function idParams(prefix: IdPrefix, example: string) {
  return z.object({
    id: z
      .string()
      .refine((v) => isId(v, prefix), { message: "No such object." })
      .openapi({ param: { name: "id", in: "path" }, example }),
  });
}

/** The JSON request body of a route, required (a missing body is validated as `{}`). */
export function jsonRequest<T extends z.ZodType>(schema: T) {
  return { body: { required: true, content: { "application/json": { schema } } } } as const;
}
