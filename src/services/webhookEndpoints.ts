import { Buffer } from "node:buffer";
import { type Page, paginate } from "../db/engine/pages.ts";
import {
  deleteWebhookEndpointRow,
  insertWebhookEndpoint,
  type WebhookEndpointRow,
  webhookEndpointListColumns,
  webhookEndpointsScope,
} from "../db/webhookEndpoints.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import { EVENT_TYPES, type EventType } from "./events.ts";
import { webhookUrlProblem } from "./webhookUrls.ts";

/**
 * Webhook endpoints of an organization. Both modes see and manage the same endpoints (receivers tell
 * test from live traffic by `livemode`). The signing secret is returned once, at creation.
 */

/** What creating an endpoint asks for, once validated; `events` omitted means all of them. */
export interface WebhookEndpointInput {
  url: string;
  events?: EventType[] | undefined;
}

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
  { sql, clock, ids }: Deps,
  organizationId: string,
  input: WebhookEndpointInput,
  opts: { allowPrivateUrls: boolean },
): Promise<WebhookEndpoint & { secret: string }> {
  const v = input;
  const problem = webhookUrlProblem(v.url, opts.allowPrivateUrls);
  if (problem) throw new ApiError("invalid_request", `url: ${problem}`, { param: "url" });
  const events = v.events ? EVENT_TYPES.filter((t) => v.events?.includes(t)) : null;
  const row = await insertWebhookEndpoint(sql, {
    id: ids.next("we"),
    organization_id: organizationId,
    url: v.url,
    events,
    secret: generateWebhookSecret(),
    created_at: clock.now(),
  });
  return { ...webhookEndpointView(row), secret: row.secret };
}

export async function listWebhookEndpoints(
  { sql }: Deps,
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
  { sql }: Deps,
  organizationId: string,
  id: string,
): Promise<{ id: string; deleted: true }> {
  if (!isId(id, "we") || !(await deleteWebhookEndpointRow(sql, organizationId, id))) {
    throw new ApiError("not_found", "No such webhook endpoint.");
  }
  return { id, deleted: true };
}
