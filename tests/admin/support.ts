import { createTestContext, type TestContext } from "../helpers/app.ts";

/** The operator token of the admin tests (at least 32 characters, as the environment requires). */
export const ADMIN_TOKEN = "adm_test_token_0123456789abcdefghijklmnopqrstuvwxyz";

export function createAdminTestContext(env: Record<string, string> = {}): Promise<TestContext> {
  return createTestContext({ env: { ADMIN_TOKEN, ...env } });
}

/** Answer bodies are read freely in the tests, as a client would. */
// biome-ignore lint/suspicious/noExplicitAny: JSON of any shape
type Json = any;

/**
 * Calls an admin route with the admin token (or `token`), and returns the status, the parsed body and
 * the response (still unread, for expectApiError).
 */
export async function admin(
  ctx: TestContext,
  method: string,
  path: string,
  opts: { json?: unknown; token?: string | null; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Json; res: Response }> {
  const token = opts.token === undefined ? ADMIN_TOKEN : opts.token;
  const res = await ctx.request(`/api/admin/v1${path}`, {
    method,
    ...(opts.json !== undefined ? { json: opts.json } : {}),
    ...(opts.body !== undefined ? { body: opts.body } : {}),
    ...(token !== null ? { key: token } : {}),
    headers: opts.headers,
  });
  const text = await res.clone().text();
  return { status: res.status, body: text ? JSON.parse(text) : null, res };
}

export async function count(ctx: TestContext, table: string): Promise<number> {
  const [row] = await ctx.deps.sql<{ n: number }[]>`select count(*)::int as n from ${ctx.deps.sql(table)}`;
  return row!.n;
}
