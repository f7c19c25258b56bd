import type { Fragment } from "postgres";
import type { Db } from "../db/engine/connection.ts";
import { paginate } from "../lists/cursor.ts";
import type { EventType } from "./events.ts";

/** Reading the events outbox: `GET /v1/events` shows the events of the key's mode only. */

interface EventRow {
  id: string;
  type: EventType;
  livemode: boolean;
  data: Record<string, unknown>;
  created_at: Date;
}

export interface EventObject {
  id: string;
  type: EventType;
  livemode: boolean;
  createdAt: string;
  data: Record<string, unknown>;
}

export function eventView(r: EventRow): EventObject {
  return {
    id: r.id,
    type: r.type,
    livemode: r.livemode,
    createdAt: r.created_at.toISOString(),
    data: r.data,
  };
}

/** The scope of an events list; each shape has its index: (organization_id, livemode[, type], created_at desc, id desc). */
export function eventsScope(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  filters: { type?: EventType | undefined },
): Fragment {
  return sql`organization_id = ${scope.organizationId} and livemode = ${scope.livemode}
    ${filters.type !== undefined ? sql`and type = ${filters.type}` : sql``}`;
}

export async function listEvents(
  sql: Db,
  scope: { organizationId: string; livemode: boolean },
  q: { limit: number; starting_after?: string | undefined; type?: EventType | undefined },
) {
  return paginate<EventRow, EventObject>({
    sql,
    table: "events",
    where: eventsScope(sql, scope, q),
    prefix: "evt",
    limit: q.limit,
    startingAfter: q.starting_after,
    columns: sql`id, type, livemode, data, created_at`,
    map: eventView,
  });
}
