import type { components, paths, webhooks } from "./openapi.ts";

/**
 * The client's types, read from the generated `paths`: what each operation takes and answers is the
 * document's, so a schema change reaches the client's signatures through `npm run generate:client`.
 */

export type Path = keyof paths;
export type Method = "get" | "post" | "patch" | "delete";

type Operation<P extends Path, M extends Method> = NonNullable<paths[P][M]>;

type JsonContent<X> = X extends { content: { "application/json": infer Body } } ? Body : never;

/** The JSON body of a request (never when the operation takes none). */
export type RequestBody<P extends Path, M extends Method> =
  Operation<P, M> extends { requestBody?: infer Body } ? JsonContent<NonNullable<Body>> : never;

/** The JSON body of a successful answer (200 or 201). */
export type ResponseBody<P extends Path, M extends Method> =
  Operation<P, M> extends { responses: infer R } ? JsonContent<R[Extract<keyof R, 200 | 201>]> : never;

/** The query parameters of an operation. */
export type Query<P extends Path, M extends Method> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** The query of a cursor list without its cursor, which the pager moves itself. */
export type ListQuery<P extends Path> = Omit<Query<P, "get">, "starting_after"> & { starting_after?: string };

/** An item of a cursor list (`{data: [...], has_more}`). */
export type ListItem<P extends Path> = ResponseBody<P, "get"> extends { data: (infer T)[] } ? T : never;

// Named by the operations that answer them (paths are stable; schema names are the document's to choose).
export type Agent = ResponseBody<"/api/v1/agents/{id}", "get">;
export type Call = ResponseBody<"/api/v1/calls/{id}", "get">;
export type Transcript = ResponseBody<"/api/v1/calls/{id}/transcript", "get">;
export type Recording = ResponseBody<"/api/v1/calls/{id}/recording", "get">;
export type Campaign = ResponseBody<"/api/v1/campaigns/{id}", "get">;
export type Task = ListOf<ResponseBody<"/api/v1/tasks", "get">["tasks"]>;
export type BlockedNumber = ListItem<"/api/v1/blocked-numbers">;
export type Contact = ResponseBody<"/api/v1/contacts/{id}", "get">;
export type KnowledgeDocument = ResponseBody<"/api/v1/knowledge-bases/{id}/documents/{documentId}", "get">;
export type SearchResults = ResponseBody<"/api/v1/knowledge-bases/{id}/search", "get">;
export type Event = ListItem<"/api/v1/events">;
export type WebhookEndpoint = ResponseBody<"/api/v1/webhook-endpoints/{id}", "get">;
export type WebhookDelivery = ListItem<"/api/v1/webhook-endpoints/{id}/deliveries">;
export type WebCallSession = ResponseBody<"/api/v1/web-call-sessions", "post">;

type ListOf<T> = T extends (infer Item)[] ? Item : never;

/** A webhook event as delivered, by `type` (the document's `webhooks` section). */
export type WebhookEvent = {
  [K in keyof webhooks]: JsonContent<NonNullable<webhooks[K]["post"]>["requestBody"]>;
}[keyof webhooks];

/**
 * The error codes the document declares (`Error.error.code`), for completion and narrowing. A server
 * newer than this client may answer a code not listed yet, so any string is accepted too.
 */
export type ErrorCode =
  | (components["schemas"] extends { Error: { error: { code: infer C extends string } } } ? C : never)
  | "connection_error"
  | "unexpected_response"
  | (string & {});
