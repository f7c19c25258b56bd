import { Buffer } from "node:buffer";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import { type Page, type PageInput, paginate } from "../db/engine/pages.ts";
import { lockEvent } from "../db/events.ts";
import type { InsertedTimerRow } from "../db/timers.ts";
import {
  type DeliveryLogRow,
  deliveriesPage,
  firstAttempts,
  redeliverEventRows,
} from "../db/webhookDeliveries.ts";
import {
  deleteWebhookEndpointRow,
  findWebhookEndpoint,
  insertWebhookEndpointWithin,
  rotateWebhookSecretRow,
  updateWebhookEndpointRow,
  type WebhookEndpointView,
  webhookEndpointsPage,
} from "../db/webhookEndpoints.ts";
import type { Deps } from "../deps.ts";
import { ApiError, notFound } from "../errors.ts";
import { isId, ROW_ID_KEY, rowId } from "../ids.ts";
import { EVENT_TYPES, type EventType } from "./events.ts";
import { webhookUrlProblem } from "./webhookUrls.ts";

/**
 * Webhook endpoints: each has the mode of the key that created it, and keys see and manage only the
 * endpoints of their own mode (the other mode's are 404). A live endpoint receives every event of the
 * organization (both modes: receivers filter on `livemode`, and contact events from test-key writes
 * are real changes); a test endpoint only `livemode` false events, so a test key never obtains live
 * calls, transcripts or campaigns. At most MAX_ENDPOINTS per organization and mode, disabled ones
 * included. The signing secret is shown at creation and rotation only.
 *
 * Managing endpoints needs a key that is not restricted to some agents (routes check it): an endpoint
 * receives the events of every agent.
 */

export const MAX_ENDPOINTS = 20;
/** How long the previous secret keeps signing after a rotation. */
export const PREVIOUS_SECRET_TTL_MS = 24 * 60 * 60 * 1000;

/** The most replaced secrets that sign beside the current one (rotations within a day). */
export const MAX_PREVIOUS_SECRETS = 10;

/** The key that manages endpoints: its organization and mode. */
export interface EndpointScope {
  organizationId: string;
  livemode: boolean;
}

export interface WebhookEndpointInput {
  url: string;
  /** Omitted: every type, including types added later. */
  events?: EventType[] | undefined;
  enabled?: boolean | undefined;
}

export interface WebhookEndpointPatch {
  url?: string | undefined;
  /** null: every type again. */
  events?: EventType[] | null | undefined;
  enabled?: boolean | undefined;
}

export interface WebhookEndpoint {
  id: string;
  livemode: boolean;
  url: string;
  events: EventType[];
  enabled: boolean;
  createdAt: string;
}

export function webhookEndpointView(r: WebhookEndpointView): WebhookEndpoint {
  return {
    id: r.id,
    livemode: r.livemode,
    url: r.url,
    // null is stored for "all", so that types added later reach the endpoint too.
    events: (r.events ?? [...EVENT_TYPES]) as EventType[],
    enabled: r.enabled,
    createdAt: r.created_at.toISOString(),
  };
}

/** Standard Webhooks secret: `whsec_` and 32 random bytes in base64. */
export function generateWebhookSecret(): string {
  return `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
}

function checkUrl(deps: Pick<Deps, "env">, url: string): void {
  const problem = webhookUrlProblem(url, deps.env.WEBHOOK_ALLOW_PRIVATE_URLS);
  if (problem) throw new ApiError("invalid_request", `url: ${problem}`, { param: "url" });
}

/** Event types in their canonical order; null for "all". */
function eventTypes(events: EventType[] | null | undefined): string[] | null {
  return events ? EVENT_TYPES.filter((t) => events.includes(t)) : null;
}

export async function createWebhookEndpoint(
  deps: Deps,
  scope: EndpointScope,
  input: WebhookEndpointInput,
): Promise<WebhookEndpoint & { secret: string }> {
  checkUrl(deps, input.url);
  const row = await pipelinedTransaction(deps.sql, (tx) =>
    insertWebhookEndpointWithin(
      tx,
      {
        id: deps.ids.next("we"),
        organization_id: scope.organizationId,
        livemode: scope.livemode,
        url: input.url,
        events: eventTypes(input.events),
        enabled: input.enabled ?? true,
        secret: generateWebhookSecret(),
        created_at: deps.clock.now(),
      },
      MAX_ENDPOINTS,
    ),
  );
  if (!row) {
    throw new ApiError(
      "too_many_endpoints",
      `This organization already has ${MAX_ENDPOINTS} ${scope.livemode ? "live" : "test"} webhook endpoints ` +
        "(disabled ones count too); delete one first.",
    );
  }
  return { ...webhookEndpointView(row), secret: row.secret };
}

export function listWebhookEndpoints(
  { sql }: Pick<Deps, "sql">,
  scope: EndpointScope,
  q: PageInput,
): Promise<Page<WebhookEndpoint>> {
  return paginate<WebhookEndpointView, WebhookEndpoint>({
    ...webhookEndpointsPage(sql, scope, q),
    map: webhookEndpointView,
  });
}

export async function getWebhookEndpoint(
  { sql }: Pick<Deps, "sql">,
  scope: EndpointScope,
  id: string,
): Promise<WebhookEndpoint> {
  const row = isId(id, "we") ? await findWebhookEndpoint(sql, scope, id) : null;
  if (!row) throw notFound("webhook endpoint");
  return webhookEndpointView(row);
}

export async function updateWebhookEndpoint(
  deps: Deps,
  scope: EndpointScope,
  id: string,
  patch: WebhookEndpointPatch,
): Promise<WebhookEndpoint> {
  if (!isId(id, "we")) throw notFound("webhook endpoint");
  if (patch.url !== undefined) checkUrl(deps, patch.url);
  const row = await updateWebhookEndpointRow(deps.sql, scope, id, {
    url: patch.url,
    events: patch.events === undefined ? undefined : eventTypes(patch.events),
    enabled: patch.enabled,
  });
  if (!row) throw notFound("webhook endpoint");
  return webhookEndpointView(row);
}

/**
 * A new signing secret, shown in this answer only. For PREVIOUS_SECRET_TTL_MS the previous one keeps
 * signing too: `webhook-signature` then carries both signatures, space-separated, so receivers can
 * switch without losing a delivery. A second rotation within that day does not cut the first one's
 * day short: each replaced secret signs for its own day (the newest MAX_PREVIOUS_SECRETS of them).
 */
export async function rotateWebhookSecret(
  deps: Deps,
  scope: EndpointScope,
  id: string,
): Promise<WebhookEndpoint & { secret: string; previousSecretExpiresAt: string }> {
  if (!isId(id, "we")) throw notFound("webhook endpoint");
  const until = new Date(deps.clock.now().getTime() + PREVIOUS_SECRET_TTL_MS);
  const row = await rotateWebhookSecretRow(
    deps.sql,
    scope,
    id,
    generateWebhookSecret(),
    until,
    MAX_PREVIOUS_SECRETS,
  );
  if (!row) throw notFound("webhook endpoint");
  return {
    ...webhookEndpointView(row),
    secret: row.secret,
    previousSecretExpiresAt: until.toISOString(),
  };
}

export async function deleteWebhookEndpoint(
  { sql }: Pick<Deps, "sql">,
  scope: EndpointScope,
  id: string,
): Promise<{ id: string; deleted: true }> {
  if (!isId(id, "we") || !(await deleteWebhookEndpointRow(sql, scope, id)))
    throw notFound("webhook endpoint");
  return { id, deleted: true };
}

export interface Delivery {
  id: string;
  eventId: string;
  endpointId: string;
  /** Attempts made so far. */
  attempt: number;
  status: "pending" | "succeeded" | "failed";
  responseStatus: number | null;
  durationMs: number | null;
  error: string | null;
  createdAt: string;
}

/** A delivery as the API shows it; `rowIdKey` keys its id (ids.ts, `rowId`). */
export const deliveryView =
  (rowIdKey: Uint8Array) =>
  (r: DeliveryLogRow): Delivery => ({
    id: rowId(rowIdKey, "whd", r.id, r.created_at),
    eventId: r.event_id,
    endpointId: r.endpoint_id,
    attempt: r.attempts,
    // `dropped`: its endpoint was disabled or deleted before it could be sent.
    status: r.status === "delivered" ? "succeeded" : r.status === "pending" ? "pending" : "failed",
    responseStatus: r.last_status,
    durationMs: r.last_duration_ms,
    error: r.last_error,
    createdAt: r.created_at.toISOString(),
  });

/** The deliveries to one endpoint, newest first: each event sent (or being sent) and how its last attempt went. */
export async function listEndpointDeliveries(
  { sql, secrets }: Pick<Deps, "sql" | "secrets">,
  scope: EndpointScope,
  id: string,
  q: PageInput,
): Promise<Page<Delivery>> {
  if (!isId(id, "we") || !(await findWebhookEndpoint(sql, scope, id))) throw notFound("webhook endpoint");
  const key = await secrets.get(ROW_ID_KEY);
  return paginate<DeliveryLogRow, Delivery>({ ...deliveriesPage(sql, id, q, key), map: deliveryView(key) });
}

/**
 * Sends an event of the key's mode again: a new delivery to every enabled endpoint that receives it
 * and subscribes to its type (the endpoints of both modes that would receive it today), each with its
 * own attempts. None when no endpoint receives it. The answer lists the deliveries to the endpoints of
 * the key's mode only: a test event reaches live endpoints too, but a test key never sees them.
 */
export async function redeliverEvent(
  deps: Deps,
  scope: EndpointScope,
  eventId: string,
): Promise<{ eventId: string; deliveries: Delivery[] }> {
  if (!isId(eventId, "evt")) throw notFound("event");
  // Read before the deliveries are written: a failure after them would answer 500 for work done.
  const rowIdKey = await deps.secrets.get(ROW_ID_KEY);
  const { rows, timers } = await pipelinedTransaction(deps.sql, async (tx) => {
    // Locked against its removal by retention until the deliveries refer to it; one being removed
    // meanwhile is gone when the lock is granted.
    const event = await lockEvent(tx, scope, eventId);
    if (!event) throw notFound("event");
    const created = await redeliverEventRows(tx, event);
    const ids = created.map((d) => d.id);
    const scheduled: InsertedTimerRow[] =
      ids.length === 0
        ? []
        : ((await deps.timers.insertFrom(tx, firstAttempts(tx, ids))) as unknown as InsertedTimerRow[]);
    return { rows: created, timers: scheduled };
  });
  deps.timers.scheduled(timers);
  return {
    eventId,
    deliveries: rows.filter((r) => r.endpoint_livemode === scope.livemode).map(deliveryView(rowIdKey)),
  };
}
