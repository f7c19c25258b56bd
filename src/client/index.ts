/**
 * `voice-service/client`: a typed client of this service's API, for Node, Bun, Deno and browsers
 * (fetch and Web Crypto only). Its types come from /api/openapi.json (openapi.ts, generated).
 */
export type { components, paths, webhooks } from "./openapi.ts";
