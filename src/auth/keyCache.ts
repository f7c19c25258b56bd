import type { SecretKeyAuth } from "./access.ts";

/**
 * A short-lived cache of resolved secret keys, one per process (the composition root makes it). Resolving a key costs a
 * SHA-256 and a query on every authenticated request; with the cache a hot key costs the hash only.
 *
 * Correctness rests on eviction, not on the time to live:
 * - a revocation or an organization change made in this process evicts at once (`evict`);
 * - with PostgreSQL, a trigger (sql/0006_key_changes.sql) notifies every process on `key_changes`,
 *   and each process listening (caches.ts `listenForChanges`) evicts too;
 * - a resolution that raced with a change is not stored (the generation moved while it ran).
 * The time to live only bounds how long a lost notification could leave an entry stale.
 */
export interface KeyChange {
  keyId?: string;
  organizationId?: string;
}

const TTL_MS = 30_000;
const MAX_ENTRIES = 10_000;

export class KeyCache {
  #entries = new Map<string, { auth: SecretKeyAuth; expires: number }>();
  #generation = 0;

  get generation(): number {
    return this.#generation;
  }

  get(hash: string, now = Date.now()): SecretKeyAuth | null {
    const hit = this.#entries.get(hash);
    if (!hit) return null;
    if (hit.expires <= now) {
      this.#entries.delete(hash);
      return null;
    }
    return hit.auth;
  }

  /** Stores a resolution unless a change happened since `generation` was read. */
  set(hash: string, auth: SecretKeyAuth, generation: number, now = Date.now()): void {
    if (generation !== this.#generation) return;
    if (this.#entries.size >= MAX_ENTRIES) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(hash, { auth, expires: now + TTL_MS });
  }

  /** Evicts the entries a change affects; a change naming nothing evicts everything. */
  evict(change: KeyChange): void {
    this.#generation++;
    if (change.keyId === undefined && change.organizationId === undefined) {
      this.#entries.clear();
      return;
    }
    for (const [hash, { auth }] of this.#entries) {
      if (auth.keyId === change.keyId || auth.organizationId === change.organizationId)
        this.#entries.delete(hash);
    }
  }
}
