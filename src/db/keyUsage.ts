import type { Sql } from "postgres";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { Db } from "./engine/connection.ts";

/**
 * When each secret key was last used (secret_key_usage), for operators. Recording it must not cost the
 * requests that use a key: `KeyUsageRecorder.touch` is called on every authenticated request, and
 * writes at most once a minute per key and process, without waiting (the request never awaits the
 * write, and a failed write is only logged). So `lastUsedAt` is at most a minute (plus a write) behind,
 * and a busy key costs one small upsert a minute per process instead of one per request.
 */

/** How stale `lastUsedAt` may be: a key seen again within this time is not written again. */
export const KEY_USAGE_EVERY_MS = 60_000;
/** Keys remembered per process; beyond it the memory starts over (a few extra writes, no growth). */
const MAX_REMEMBERED = 10_000;

export async function recordSecretKeyUse(sql: Db, keyId: string, at: Date): Promise<void> {
  await sql`
    insert into secret_key_usage (key_id, last_used_at) values (${keyId}, ${at})
    on conflict (key_id) do update set last_used_at = greatest(secret_key_usage.last_used_at, excluded.last_used_at)`;
}

export class KeyUsageRecorder {
  readonly #sql: Sql;
  readonly #clock: Clock;
  readonly #log: Logger;
  /** Key id → when this process last wrote it (clock milliseconds). */
  readonly #written = new Map<string, number>();
  readonly #pending = new Set<Promise<void>>();

  constructor(sql: Sql, clock: Clock, log: Logger) {
    this.#sql = sql;
    this.#clock = clock;
    this.#log = log;
  }

  /** Notes that the key was just used; writes it unless this process did within the last minute. */
  touch(keyId: string): void {
    const now = this.#clock.now();
    const last = this.#written.get(keyId);
    if (last !== undefined && now.getTime() - last < KEY_USAGE_EVERY_MS) return;
    if (this.#written.size >= MAX_REMEMBERED) this.#written.clear();
    this.#written.set(keyId, now.getTime());
    const write = recordSecretKeyUse(this.#sql, keyId, now)
      .catch((err) => {
        // Forget it, so the next request tries again.
        this.#written.delete(keyId);
        this.#log.warn("could not record a key's last use", { keyId, error: (err as Error).message });
      })
      .finally(() => this.#pending.delete(write));
    this.#pending.add(write);
  }

  /** Resolves once the writes started so far are done (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }
}
