import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";

export interface WebhookEndpointRow {
  id: string;
  organization_id: string;
  url: string;
  /** null: every event type. */
  events: string[] | null;
  secret: string;
  created_at: Date;
}

export async function insertWebhookEndpoint(sql: Db, e: WebhookEndpointRow): Promise<WebhookEndpointRow> {
  const [row] = await sql<WebhookEndpointRow[]>`
    insert into webhook_endpoints (id, organization_id, url, events, secret, created_at)
    values (${e.id}, ${e.organization_id}, ${e.url}, ${e.events}, ${e.secret}, ${e.created_at})
    returning *`;
  return row!;
}

export async function deleteWebhookEndpointRow(
  sql: Db,
  organizationId: string,
  id: string,
): Promise<boolean> {
  const rows = await sql`
    delete from webhook_endpoints where id = ${id} and organization_id = ${organizationId} returning id`;
  return rows.length === 1;
}

/** Listing never selects the secret. */
export const webhookEndpointListColumns = (sql: Db): Fragment => sql`id, url, events, created_at`;

export const webhookEndpointsScope = (sql: Db, organizationId: string): Fragment =>
  sql`organization_id = ${organizationId}`;
