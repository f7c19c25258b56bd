/**
 * A short-lived cache of what most requests read and few change (resolved secret keys, an
 * organization's agents), one per process, made by the composition root. Correctness rests on
 * eviction, not on the time to live: a change made in this process evicts at once; with PostgreSQL a
 * trigger notifies every process, which evicts too (compose.ts `evictOnChanges`); a read that raced
 * with a change is not stored (the generation moved while it ran). The time to live only bounds how
 * long a lost notification could leave an entry stale; past `maxEntries` the oldest entry goes.
 */
export class GenerationCache<V> {
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

  get(key: string, now = Date.now()): V | undefined {
    const hit = this.#entries.get(key);
    if (!hit) return undefined;
    if (hit.expires <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return hit.value;
  }

  /** Stores a read unless a change happened since `generation` was read. */
  set(key: string, value: V, generation: number, now = Date.now()): void {
    if (generation !== this.#generation) return;
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(key, { value, expires: now + this.#ttlMs });
  }

  /** The value of a key: cached, or read with `read` and kept. */
  async through(key: string, read: () => Promise<V>): Promise<V> {
    const cached = this.get(key);
    if (cached !== undefined) return cached;
    const generation = this.#generation;
    const value = await read();
    this.set(key, value, generation);
    return value;
  }

  /** Evicts one key's entry, or every entry. */
  evict(key?: string): void {
    this.#generation++;
    if (key === undefined) this.#entries.clear();
    else this.#entries.delete(key);
  }

  /** Evicts every entry whose value `affected` picks. */
  evictWhere(affected: (value: V) => boolean): void {
    this.#generation++;
    for (const [key, { value }] of this.#entries) if (affected(value)) this.#entries.delete(key);
  }
}

/** A row as this process last read it, and its version (PostgreSQL's `xmin`: every change makes a new one). */
export interface Versioned<T> {
  row: T;
  version: string;
}

/**
 * Rows kept with their versions, for work that tells the database which version it decided on and
 * is told when that is no longer the row's (services/placement.ts): nothing here needs evicting for
 * correctness, so nothing expires; past `maxEntries` the oldest entry goes.
 */
export class VersionedRows<T> {
  readonly #maxEntries: number;
  readonly #entries = new Map<string, Versioned<T>>();

  constructor(opts: { maxEntries?: number } = {}) {
    this.#maxEntries = opts.maxEntries ?? 10_000;
  }

  get(id: string): Versioned<T> | undefined {
    return this.#entries.get(id);
  }

  set(id: string, value: Versioned<T>): void {
    this.#entries.delete(id);
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(id, value);
  }

  delete(id: string): void {
    this.#entries.delete(id);
  }
}
