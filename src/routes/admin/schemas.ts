import { z } from "@hono/zod-openapi";
import { type IdPrefix, isId } from "../../ids.ts";
import { ScopeSchema } from "../../services/tenancy.ts";

/** Response schemas of the admin API: what the tenancy services return, documented. */

const Timestamp = z.string().openapi({ example: "2026-11-21T09:30:00.000Z" });
const orgId = z.string().openapi({ example: "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
const agentId = z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
const keyId = z.string().openapi({ example: "key_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
const start = z
  .string()
  .openapi({ description: "The visible start of the key, for operators.", example: "inf_test_Ab3x…" });

export const OrganizationSchema = z
  .object({
    id: orgId,
    name: z.string().openapi({ example: "Acme" }),
    paidPlan: z.boolean(),
    planMinutes: z.number().int().openapi({ example: 1000 }),
    createdAt: Timestamp,
  })
  .openapi("Organization");

export const AgentDetailsSchema = z
  .object({
    id: agentId,
    organizationId: orgId,
    name: z.string().openapi({ example: "Reception" }),
    active: z.boolean(),
    livekitAgentName: z.string().nullable().openapi({ example: null }),
    language: z.enum(["en", "fr"]),
    createdAt: Timestamp,
  })
  .openapi("AgentDetails");

const secretKeyFields = {
  id: keyId,
  organizationId: orgId,
  mode: z.enum(["live", "test"]),
  scopes: z.array(ScopeSchema).openapi({ example: ["webcalls:write", "calls:write"] }),
  agentIds: z.array(z.string()).nullable().openapi({ description: "`null`: every agent.", example: null }),
  start,
  createdAt: Timestamp,
};

export const CreatedSecretKeySchema = z
  .object({
    ...secretKeyFields,
    key: z.string().openapi({
      description: "The secret key. Shown only in this answer: only its hash is stored.",
      example: "inf_test_4fT9…",
    }),
  })
  .openapi("CreatedSecretKey");

export const RevokedSecretKeySchema = z
  .object({ ...secretKeyFields, revoked: z.literal(true), revokedAt: Timestamp })
  .openapi("RevokedSecretKey");

const publishableKeyFields = {
  id: keyId,
  organizationId: orgId,
  agentId,
  allowedOrigins: z.array(z.string()).openapi({ example: ["https://www.example.com"] }),
  monthlyMinuteCap: z.number().int().openapi({ example: 500 }),
  start,
  createdAt: Timestamp,
};

export const CreatedPublishableKeySchema = z
  .object({
    ...publishableKeyFields,
    key: z.string().openapi({
      description: "The publishable key. Shown only in this answer: only its hash is stored.",
      example: "inf_pub_7kQ2…",
    }),
  })
  .openapi("CreatedPublishableKey");

export const RevokedPublishableKeySchema = z
  .object({ ...publishableKeyFields, revoked: z.literal(true), revokedAt: Timestamp })
  .openapi("RevokedPublishableKey");

export const KnowledgeBaseSchema = z
  .object({
    id: z.string().openapi({ example: "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    organizationId: orgId,
    name: z.string(),
    createdAt: Timestamp,
  })
  .openapi("KnowledgeBase");

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
