import { GenerationCache } from "../caches.ts";
import type { SecretKeyAuth } from "./access.ts";

/**
 * Resolved secret keys by the hex of their hash, one cache per process (the composition root makes
 * it). Resolving a key costs a SHA-256 and a query on every authenticated request; with the cache a
 * hot key costs the hash only. A revocation or an organization change evicts (`evictChange`): made in
 * this process at once, made elsewhere through the `key_changes` notification (sql/0006_key_changes.sql).
 */
export class KeyCache extends GenerationCache<SecretKeyAuth> {
  /** Evicts the entries a change affects; a change naming nothing evicts everything. */
  evictChange(change: KeyChange): void {
    const { keyId, organizationId } = change;
    if (keyId === undefined && organizationId === undefined) this.evict();
    else this.evictWhere((auth) => auth.keyId === keyId || auth.organizationId === organizationId);
  }
}

/** What a change to keys names: one key, an organization's keys, or (neither) any key. */
export interface KeyChange {
  keyId?: string;
  organizationId?: string;
}
