import type { Sql } from "postgres";
import type { KeyCache, KeyChange } from "./auth/keyCache.ts";

/**
 * Short-lived caches of what most requests read and few change (an organization's agents), one per
 * process, made by the composition root. Correctness rests on eviction, as with the key cache: a change
 * made in this process evicts at once; with PostgreSQL a trigger notifies every process, which evicts
 * too (`listenForChanges`); a read that raced with a change is not stored (the generation moved while
 * it ran). The time to live only bounds how long a lost notification could leave an entry stale.
 */
export class OrganizationCache<V> {
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  #entries = new Map<string, { value: V; expires: number }>();
  #generation = 0;

  constructor(opts: { ttlMs?: number; maxEntries?: number } = {}) {
    this.#ttlMs = opts.ttlMs ?? 30_000;
    this.#maxEntries = opts.maxEntries ?? 10_000;
  }

  /** Read it before reading the database, and give it back to `set`. */
  get generation(): number {
    return this.#generation;
  }

  get(organizationId: string, now = Date.now()): V | undefined {
    const hit = this.#entries.get(organizationId);
    if (!hit) return undefined;
    if (hit.expires <= now) {
      this.#entries.delete(organizationId);
      return undefined;
    }
    return hit.value;
  }

  /** Stores a read unless a change happened since `generation` was read. */
  set(organizationId: string, value: V, generation: number, now = Date.now()): void {
    if (generation !== this.#generation) return;
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(organizationId, { value, expires: now + this.#ttlMs });
  }

  /** Evicts one organization's entry, or every entry. */
  evict(organizationId?: string): void {
    this.#generation++;
    if (organizationId === undefined) this.#entries.clear();
    else this.#entries.delete(organizationId);
  }

  /** The value of an organization: cached, or read with `read` and kept. */
  async through(organizationId: string, read: () => Promise<V>): Promise<V> {
    const cached = this.get(organizationId);
    if (cached !== undefined) return cached;
    const generation = this.#generation;
    const value = await read();
    this.set(organizationId, value, generation);
    return value;
  }
}

/**
 * Listens for changes made by other processes (PostgreSQL only: the embedded database is used by one
 * process, and its single connection cannot be given to LISTEN): keys and organizations
 * (sql/0006), agents (sql/0027).
 */
export async function listenForChanges(
  sql: Sql,
  caches: { keyCache: KeyCache; agentLists: OrganizationCache<unknown> },
): Promise<void> {
  const parse = (payload: string): KeyChange => {
    try {
      return JSON.parse(payload) as KeyChange;
    } catch {
      return {}; // a payload that cannot be attributed drops every entry
    }
  };
  await sql.listen(
    "key_changes",
    (payload) => caches.keyCache.evict(parse(payload)),
    // On (re)connection anything may have been missed: start from an empty cache.
    () => caches.keyCache.evict({}),
  );
  await sql.listen(
    "agent_changes",
    (payload) => caches.agentLists.evict(parse(payload).organizationId),
    () => caches.agentLists.evict(),
  );
}
