import { createRoute } from "@hono/zod-openapi";
import { type AdminOperation, adminOperations } from "../../admin/operations.ts";
import { idParams, jsonRequest } from "../../admin/schema/fields.ts";
import type { Deps } from "../../deps.ts";
import { type ErrorCode, errorResponses } from "../../errors.ts";
import type { App, RouteRegistration } from "../../http/appEnv.ts";
import { ADMIN_NOTE, adminSecurity, registerAdminSecurityScheme, requireAdminToken } from "./auth.ts";

/**
 * The operators' API under /api/admin/v1: one route per operation of admin/operations.ts. Always
 * registered and documented; gated at request time (404 without ADMIN_TOKEN).
 */
export const adminRoutes: RouteRegistration[] = [
  (app, deps) => {
    registerAdminSecurityScheme(app);
    const guard = requireAdminToken(deps);
    for (const op of adminOperations) registerOperation(app, deps, op, guard);
  },
];

/** `create-organization` → `adminCreateOrganization`: the CLI command, so both names stay in step. */
export function adminOperationId(command: string): string {
  return `admin${command.replace(/(^|-)([a-z])/g, (_, _dash: string, c: string) => c.toUpperCase())}`;
}

function registerOperation(
  app: App,
  deps: Deps,
  op: AdminOperation,
  guard: ReturnType<typeof requireAdminToken>,
) {
  // Without ADMIN_TOKEN every admin route answers 404 `not_found`, as if absent.
  const codes: ErrorCode[] = ["invalid_request", "invalid_key", "not_found", ...op.errors];
  // Every write reads its body, one the operation takes or not (http/body.ts).
  if (op.method !== "get") codes.push("payload_too_large", "unsupported_media_type");
  if (op.query) codes.push("invalid_query");
  const route = createRoute({
    method: op.method,
    path: `/api/admin/v1${op.path}`,
    tags: ["Admin"],
    operationId: adminOperationId(op.name),
    summary: op.summary,
    description: `${op.description} ${ADMIN_NOTE}`,
    security: adminSecurity,
    middleware: [guard] as const,
    request: {
      ...(op.id ? { params: idParams(op.id.prefix, op.id.example) } : {}),
      ...(op.body ? jsonRequest(op.body) : {}),
      ...(op.query ? { query: op.query as never } : {}),
    },
    responses: {
      [op.response.status]: {
        description: op.response.description,
        content: { "application/json": { schema: op.response.schema } },
      },
      ...errorResponses(...new Set(codes)),
    },
  });
  app.openapi(route, async (c) => {
    const id = op.id ? (c.req.valid("param" as never) as { id: string }).id : "";
    const input = op.body
      ? (c.req.valid("json" as never) as Record<string, unknown>)
      : op.query
        ? (c.req.valid("query" as never) as Record<string, unknown>)
        : {};
    return c.json(await op.run(deps, id, input), op.response.status) as never;
  });
}
