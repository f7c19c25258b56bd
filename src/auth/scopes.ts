/** The scopes a secret key can be granted; `*` grants all of them. */
export const SCOPES = [
  "webcalls:write",
  "calls:read",
  "calls:write",
  "campaigns:read",
  "campaigns:write",
  "contacts:read",
  "contacts:write",
  "knowledge:read",
  "knowledge:write",
  "tasks:read",
  "tasks:write",
  "webhooks:read",
  "webhooks:write",
  "events:read",
  "agents:read",
] as const;
export type Scope = (typeof SCOPES)[number];

export function hasScope(granted: readonly string[], needed: Scope): boolean {
  return granted.includes("*") || granted.includes(needed);
}
