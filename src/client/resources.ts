import { Pager } from "./pagination.ts";
import { pathOf, type RequestOptions, type Transport } from "./transport.ts";
import type { ListItem, ListQuery, Method, Path, Query, RequestBody, ResponseBody } from "./types.ts";

/**
 * One class per resource of the API, one method per operation, each typed by the generated `paths`.
 * Requests that only read, and deletes, are retried after a 429 or 503 (the service did nothing);
 * other writes are not, except the minting of session tokens, which carries an Idempotency-Key.
 */
abstract class Resource {
  // A field assigned in the constructor, not a parameter property: Node's type stripping runs only
  // syntax that erases, so the client's sources run there as they are.
  protected readonly transport: Transport;

  constructor(transport: Transport) {
    this.transport = transport;
  }

  protected call<P extends Path, M extends Method>(
    method: M,
    path: P,
    params: Record<string, string>,
    opts: RequestOptions = {},
  ): Promise<ResponseBody<P, M>> {
    const retry = opts.retry ?? (method === "get" || method === "delete");
    return this.transport.request(method.toUpperCase(), pathOf(path, params), { ...opts, retry });
  }

  protected pager<P extends Path>(
    path: P,
    params: Record<string, string>,
    query: ListQuery<P> | undefined,
  ): Pager<ListItem<P> & { id: string }> {
    const { starting_after, ...filters } = (query ?? {}) as Record<string, string | number | boolean>;
    return new Pager(
      (cursor) =>
        this.call("get", path, params, { query: { ...filters, starting_after: cursor } }) as Promise<{
          data: (ListItem<P> & { id: string })[];
          has_more: boolean;
        }>,
      starting_after as string | undefined,
    );
  }
}

export class Agents extends Resource {
  list(): Promise<ResponseBody<"/api/v1/agents", "get">> {
    return this.call("get", "/api/v1/agents", {});
  }
  get(id: string) {
    return this.call("get", "/api/v1/agents/{id}", { id });
  }
}

export class Calls extends Resource {
  create(body: RequestBody<"/api/v1/calls", "post">) {
    return this.call("post", "/api/v1/calls", {}, { body });
  }
  list(query?: ListQuery<"/api/v1/calls">) {
    return this.pager("/api/v1/calls", {}, query);
  }
  get(id: string) {
    return this.call("get", "/api/v1/calls/{id}", { id });
  }
  transcript(id: string) {
    return this.call("get", "/api/v1/calls/{id}/transcript", { id });
  }
  recording(id: string) {
    return this.call("get", "/api/v1/calls/{id}/recording", { id });
  }
  /** What the voice agent reports once the call has started (live calls). */
  reportResults(id: string, body: RequestBody<"/api/v1/calls/{id}/results", "post">) {
    return this.call("post", "/api/v1/calls/{id}/results", { id }, { body });
  }
}

export class Campaigns extends Resource {
  create(body: RequestBody<"/api/v1/campaigns", "post">) {
    return this.call("post", "/api/v1/campaigns", {}, { body });
  }
  list(query?: ListQuery<"/api/v1/campaigns">) {
    return this.pager("/api/v1/campaigns", {}, query);
  }
  get(id: string) {
    return this.call("get", "/api/v1/campaigns/{id}", { id });
  }
  cancel(id: string) {
    return this.call("post", "/api/v1/campaigns/{id}/cancel", { id });
  }
}

export class Tasks extends Resource {
  list(): Promise<ResponseBody<"/api/v1/tasks", "get">> {
    return this.call("get", "/api/v1/tasks", {});
  }
  delete(id: string) {
    return this.call("delete", "/api/v1/tasks/{id}", { id });
  }
}

export class BlockedNumbers extends Resource {
  create(body: RequestBody<"/api/v1/blocked-numbers", "post">) {
    return this.call("post", "/api/v1/blocked-numbers", {}, { body });
  }
  list(query?: ListQuery<"/api/v1/blocked-numbers">) {
    return this.pager("/api/v1/blocked-numbers", {}, query);
  }
  delete(id: string) {
    return this.call("delete", "/api/v1/blocked-numbers/{id}", { id });
  }
}

export class Contacts extends Resource {
  create(body: RequestBody<"/api/v1/contacts", "post">) {
    return this.call("post", "/api/v1/contacts", {}, { body });
  }
  list(query?: ListQuery<"/api/v1/contacts">) {
    return this.pager("/api/v1/contacts", {}, query);
  }
  get(id: string) {
    return this.call("get", "/api/v1/contacts/{id}", { id });
  }
  update(id: string, body: RequestBody<"/api/v1/contacts/{id}", "patch">) {
    return this.call("patch", "/api/v1/contacts/{id}", { id }, { body });
  }
  delete(id: string) {
    return this.call("delete", "/api/v1/contacts/{id}", { id });
  }
}

export class Documents extends Resource {
  create(knowledgeBaseId: string, body: RequestBody<"/api/v1/knowledge-bases/{id}/documents", "post">) {
    return this.call("post", "/api/v1/knowledge-bases/{id}/documents", { id: knowledgeBaseId }, { body });
  }
  list(knowledgeBaseId: string, query?: ListQuery<"/api/v1/knowledge-bases/{id}/documents">) {
    return this.pager("/api/v1/knowledge-bases/{id}/documents", { id: knowledgeBaseId }, query);
  }
  get(knowledgeBaseId: string, documentId: string) {
    const path = "/api/v1/knowledge-bases/{id}/documents/{documentId}";
    return this.call("get", path, { id: knowledgeBaseId, documentId });
  }
  delete(knowledgeBaseId: string, documentId: string) {
    const path = "/api/v1/knowledge-bases/{id}/documents/{documentId}";
    return this.call("delete", path, { id: knowledgeBaseId, documentId });
  }
}

export class KnowledgeBases extends Resource {
  readonly documents = new Documents(this.transport);

  /** The chunks that best match `q`, best first (a ranked query: no cursor). */
  search(knowledgeBaseId: string, query: Query<"/api/v1/knowledge-bases/{id}/search", "get">) {
    return this.call("get", "/api/v1/knowledge-bases/{id}/search", { id: knowledgeBaseId }, { query });
  }
}

export class Events extends Resource {
  list(query?: ListQuery<"/api/v1/events">) {
    return this.pager("/api/v1/events", {}, query);
  }
  /** Sends the event again to every enabled endpoint that subscribes to its type. */
  redeliver(id: string) {
    return this.call("post", "/api/v1/events/{id}/redeliver", { id });
  }
}

export class WebhookEndpoints extends Resource {
  /** The answer holds the endpoint's `secret` (`whsec_…`), shown this once: keep it for verifyWebhook. */
  create(body: RequestBody<"/api/v1/webhook-endpoints", "post">) {
    return this.call("post", "/api/v1/webhook-endpoints", {}, { body });
  }
  list(query?: ListQuery<"/api/v1/webhook-endpoints">) {
    return this.pager("/api/v1/webhook-endpoints", {}, query);
  }
  get(id: string) {
    return this.call("get", "/api/v1/webhook-endpoints/{id}", { id });
  }
  update(id: string, body: RequestBody<"/api/v1/webhook-endpoints/{id}", "patch">) {
    return this.call("patch", "/api/v1/webhook-endpoints/{id}", { id }, { body });
  }
  delete(id: string) {
    return this.call("delete", "/api/v1/webhook-endpoints/{id}", { id });
  }
  /** A new secret (shown once); the old one keeps signing beside it for 24 hours. */
  rotateSecret(id: string) {
    return this.call("post", "/api/v1/webhook-endpoints/{id}/rotate-secret", { id });
  }
  deliveries(id: string, query?: ListQuery<"/api/v1/webhook-endpoints/{id}/deliveries">) {
    return this.pager("/api/v1/webhook-endpoints/{id}/deliveries", { id }, query);
  }
}

export class WebCallSessions extends Resource {
  /**
   * Mints a single-use session token. The request carries an Idempotency-Key (a random UUID unless
   * one is given), so it is retried safely, and a repeat with the same key and body answers the same
   * token; the same key with another body is 409 `idempotency_key_reused`.
   */
  create(body: RequestBody<"/api/v1/web-call-sessions", "post">, opts: { idempotencyKey?: string } = {}) {
    const idempotencyKey = opts.idempotencyKey ?? globalThis.crypto.randomUUID();
    return this.call(
      "post",
      "/api/v1/web-call-sessions",
      {},
      { body, headers: { "idempotency-key": idempotencyKey }, retry: true },
    );
  }
}

export class WebCalls extends Resource {
  /** Starts a web call with a publishable key or a session token in the body (no secret key needed). */
  start(body: RequestBody<"/api/v1/web-calls", "post">) {
    return this.call("post", "/api/v1/web-calls", {}, { body });
  }
}
