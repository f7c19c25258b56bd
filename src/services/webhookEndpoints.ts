import { z } from "@hono/zod-openapi";
import type { Sql } from "postgres";
import type { Clock } from "../clock.ts";
import {
  deleteWebhookEndpointRow,
  insertWebhookEndpoint,
  type WebhookEndpointRow,
  webhookEndpointListColumns,
  webhookEndpointsScope,
} from "../db/webhookEndpoints.ts";
import { ApiError } from "../errors.ts";
import { isId, newId } from "../ids.ts";
import { type Page, paginate } from "../lists/cursor.ts";
import type { EventType } from "./events.ts";
import { EVENT_TYPES } from "./eventTypes.ts";
import { WEBHOOK_URL_MAX, webhookUrlProblem } from "./webhookUrls.ts";

/**
 * Webhook endpoints of an organization. Both modes see and manage the same endpoints (receivers tell
 * test from live traffic by `livemode`). The signing secret is returned once, at creation.
 */

type Ctx = { sql: Sql; clock: Clock };

export const WebhookEndpointInputSchema = z
  .object({
    url: z
      .string()
      .max(WEBHOOK_URL_MAX, { message: `must be at most ${WEBHOOK_URL_MAX} characters` })
      .openapi({
        example: "https://example.com/webhooks",
        description:
          "Where events are sent. `https:` to a public host (`http:` and private hosts only when the server " +
          "allows private webhook URLs).",
      }),
    events: z
      .array(z.enum(EVENT_TYPES, { error: `must be one of ${EVENT_TYPES.join(", ")}` }), {
        error: "must be an array of event types",
      })
      .min(1, { message: "must list at least one event type (omit it for all)" })
      .max(100, { message: "must list at most 100 event types" })
      .optional()
      .openapi({ description: "Event types to receive. Omitted: all of them, including types added later." }),
  })
  .strict()
  .openapi("WebhookEndpointInput");

export type WebhookEndpointInput = z.input<typeof WebhookEndpointInputSchema>;

export interface WebhookEndpoint {
  id: string;
  url: string;
  events: EventType[];
  createdAt: string;
}

export function webhookEndpointView(r: Pick<WebhookEndpointRow, "id" | "url" | "events" | "created_at">) {
  return {
    id: r.id,
    url: r.url,
    // null is stored for "all", so that types added later reach the endpoint too.
    events: (r.events ?? [...EVENT_TYPES]) as EventType[],
    createdAt: r.created_at.toISOString(),
  } satisfies WebhookEndpoint;
}

/** Standard Webhooks secret: `whsec_` and 32 random bytes in base64. */
export function generateWebhookSecret(): string {
  return `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
}

export async function createWebhookEndpoint(
  { sql, clock }: Ctx,
  organizationId: string,
  input: WebhookEndpointInput,
  opts: { allowPrivateUrls: boolean },
): Promise<WebhookEndpoint & { secret: string }> {
  const v = WebhookEndpointInputSchema.parse(input);
  const problem = webhookUrlProblem(v.url, opts.allowPrivateUrls);
  if (problem) throw new ApiError("invalid_request", `url: ${problem}`, { param: "url" });
  const events = v.events ? EVENT_TYPES.filter((t) => v.events?.includes(t)) : null;
  const row = await insertWebhookEndpoint(sql, {
    id: newId("we", clock),
    organization_id: organizationId,
    url: v.url,
    events,
    secret: generateWebhookSecret(),
    created_at: clock.now(),
  });
  return { ...webhookEndpointView(row), secret: row.secret };
}

export async function listWebhookEndpoints(
  { sql }: Ctx,
  organizationId: string,
  q: { limit: number; starting_after?: string | undefined },
): Promise<Page<WebhookEndpoint>> {
  return paginate<WebhookEndpointRow, WebhookEndpoint>({
    sql,
    table: "webhook_endpoints",
    where: webhookEndpointsScope(sql, organizationId),
    prefix: "we",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: webhookEndpointListColumns(sql),
    map: webhookEndpointView,
  });
}

export async function deleteWebhookEndpoint(
  { sql }: Ctx,
  organizationId: string,
  id: string,
): Promise<{ id: string; deleted: true }> {
  if (!isId(id, "we") || !(await deleteWebhookEndpointRow(sql, organizationId, id))) {
    throw new ApiError("not_found", "No such webhook endpoint.");
  }
  return { id, deleted: true };
}
