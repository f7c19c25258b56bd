import type { Fragment } from "postgres";
import type { Db } from "./engine/connection.ts";
import type { PageInput, PageRequest } from "./engine/pages.ts";

/**
 * Statements of webhook endpoints. An endpoint has the mode of the key that created them and is seen
 * only by keys of that mode; which endpoints receive an event is decided in the database
 * (`webhook_endpoints_receiving`, sql/0020), for the delivery trigger and redeliveries alike.
 */

export interface WebhookEndpointRow {
  id: string;
  organization_id: string;
  livemode: boolean;
  url: string;
  /** null: every event type. */
  events: string[] | null;
  enabled: boolean;
  secret: string;
  /** The secrets replaced by rotations, newest first, each signing beside the current one until it expires. */
  previous_secrets: { secret: string; expiresAt: string }[];
  created_at: Date;
}

/** An endpoint as it is shown: never a secret. */
export type WebhookEndpointView = Pick<
  WebhookEndpointRow,
  "id" | "livemode" | "url" | "events" | "enabled" | "created_at"
>;

/** Namespace of the advisory locks that serialise endpoint creation per organization and mode. */
const ENDPOINT_LIMIT_LOCK = 72_410_007;

/**
 * Inserts an endpoint unless its organization already has `max` of that mode; null then. Run in a
 * transaction: the first statement waits for any other creation of the same organization and mode,
 * so the second one (a new snapshot) counts what they committed, and parallel creations cannot pass
 * the limit together.
 */
export async function insertWebhookEndpointWithin(
  tx: Db,
  e: Omit<WebhookEndpointRow, "previous_secrets">,
  max: number,
): Promise<WebhookEndpointRow | null> {
  await tx`
    select pg_advisory_xact_lock(${ENDPOINT_LIMIT_LOCK}, hashtext(${e.organization_id} || ':' || ${e.livemode}::text))`;
  const [row] = await tx<WebhookEndpointRow[]>`
    insert into webhook_endpoints (id, organization_id, livemode, url, events, enabled, secret, created_at)
    select ${e.id}, ${e.organization_id}, ${e.livemode}, ${e.url}, ${e.events}, ${e.enabled}, ${e.secret},
      ${e.created_at}
    where (select count(*) from webhook_endpoints
      where organization_id = ${e.organization_id} and livemode = ${e.livemode}) < ${max}
    returning *`;
  return row ?? null;
}

/** The scope of the endpoints a key sees: its organization and mode (index webhook_endpoints_org_mode_created). */
export const webhookEndpointsScope = (
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
): Fragment => sql`organization_id = ${scope.organizationId} and livemode = ${scope.livemode}`;

/** The page of a list of endpoints (db/engine/pages.ts), on (organization_id, livemode, created_at desc, id desc). */
export function webhookEndpointsPage(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  q: PageInput,
): PageRequest<WebhookEndpointView> {
  return {
    sql,
    table: "webhook_endpoints",
    ranges: [
      {
        keys: [
          ["organization_id", scope.organizationId],
          ["livemode", scope.livemode],
        ],
      },
    ],
    prefix: "we",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: webhookEndpointListColumns(sql),
  };
}

/** What a list reads: never a secret. */
export const webhookEndpointListColumns = (sql: Db): Fragment =>
  sql`id, livemode, url, events, enabled, created_at`;

export async function findWebhookEndpoint(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  id: string,
): Promise<WebhookEndpointView | null> {
  const [row] = await sql<WebhookEndpointView[]>`
    select ${webhookEndpointListColumns(sql)} from webhook_endpoints
    where id = ${id} and ${webhookEndpointsScope(sql, scope)}`;
  return row ?? null;
}

/** Changes the fields given (`events` null: every type); null when the endpoint is not in the scope. */
export async function updateWebhookEndpointRow(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  id: string,
  patch: { url?: string | undefined; events?: string[] | null | undefined; enabled?: boolean | undefined },
): Promise<WebhookEndpointView | null> {
  const [row] = await sql<WebhookEndpointView[]>`
    update webhook_endpoints set
      url = coalesce(${patch.url ?? null}, url),
      events = ${patch.events === undefined ? sql`events` : sql`${patch.events}::text[]`},
      enabled = coalesce(${patch.enabled ?? null}::boolean, enabled)
    where id = ${id} and ${webhookEndpointsScope(sql, scope)}
    returning ${webhookEndpointListColumns(sql)}`;
  return row ?? null;
}

/**
 * Replaces the secret; the one it replaces keeps signing until `previousUntil`, beside those replaced
 * before it whose time has not run out: newest first, in the order of the rotations (not of their
 * expiry times, which come from the clock of whichever process rotated), the newest `keep` of them.
 * Null when the endpoint is not in the scope.
 */
export async function rotateWebhookSecretRow(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  id: string,
  secret: string,
  previousUntil: Date,
  keep: number,
): Promise<(WebhookEndpointView & { secret: string }) | null> {
  const [row] = await sql<(WebhookEndpointView & { secret: string })[]>`
    update webhook_endpoints set
      previous_secrets = (
        select coalesce(jsonb_agg(kept.s order by kept.n), '[]'::jsonb)
        from (
          select s, n from (
            select jsonb_build_object('secret', secret, 'expiresAt', ${previousUntil}::timestamptz) as s,
              0::bigint as n
            union all
            select p, o from jsonb_array_elements(previous_secrets) with ordinality as e (p, o)
          ) all_secrets
          where (s ->> 'expiresAt')::timestamptz > now()
          order by n
          limit ${keep}
        ) kept
      ),
      secret = ${secret}
    where id = ${id} and ${webhookEndpointsScope(sql, scope)}
    returning ${webhookEndpointListColumns(sql)}, secret`;
  return row ?? null;
}

export async function deleteWebhookEndpointRow(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  id: string,
): Promise<boolean> {
  const rows = await sql`
    delete from webhook_endpoints where id = ${id} and ${webhookEndpointsScope(sql, scope)} returning id`;
  return rows.length === 1;
}
