import type { Sql } from "postgres";

/**
 * What a change notification names (triggers of sql/0006_key_changes.sql and
 * sql/0027_agent_changes.sql, sent at commit): a key, an organization, or nothing, which means that
 * anything may have changed.
 */
export interface ChangeNotice {
  keyId?: string;
  organizationId?: string;
}

/** The channels the triggers notify on. */
export type ChangeChannel = "key_changes" | "agent_changes";

/**
 * Listens for the changes other processes make (PostgreSQL only: the embedded database is used by
 * one process, and its single connection cannot be given to LISTEN). Each channel's handler gets the
 * notice of each change, and an empty notice on every (re)connection, when anything may have been
 * missed.
 */
export async function listenForChanges(
  sql: Sql,
  handlers: Record<ChangeChannel, (change: ChangeNotice) => void>,
): Promise<void> {
  for (const [channel, handle] of Object.entries(handlers)) {
    await sql.listen(
      channel,
      (payload) => handle(parseNotice(payload)),
      () => handle({}),
    );
  }
}

function parseNotice(payload: string): ChangeNotice {
  try {
    return JSON.parse(payload) as ChangeNotice;
  } catch {
    return {}; // a payload that cannot be attributed drops every entry
  }
}
