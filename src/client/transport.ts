import { VoiceServiceError } from "./errors.ts";

/** What the client needs of `fetch` (the global one of every runtime fits). */
export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** A secret key (`inf_live_…`, `inf_test_…`); server side only. Not needed for `webCalls.start`. */
  apiKey?: string;
  /** Where the service is, e.g. `https://voice.example.com` (the paths start with `/api/`). */
  baseUrl: string;
  /** A `fetch` of your own (a proxy, a test double); the global `fetch` otherwise. */
  fetch?: FetchLike;
  /** How many times a request safe to repeat is retried after a 429 or 503. Default 2; 0 turns retries off. */
  maxRetries?: number;
  /** First backoff when the answer has no `Retry-After`, doubled on each attempt. Default 500 ms. */
  retryDelayMs?: number;
  /** The longest wait before a retry; a `Retry-After` beyond it is not waited for (the error is thrown). Default 30 s. */
  maxRetryDelayMs?: number;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | null | undefined> | undefined;
  body?: unknown;
  headers?: Record<string, string>;
  /** The request may be sent again after a 429 or 503: it reads, or it carries an Idempotency-Key. */
  retry?: boolean;
  signal?: AbortSignal | undefined;
}

/** Statuses after which the service did nothing and asks to come back later. */
const RETRYABLE_STATUSES = new Set([429, 503]);

/** Sends requests: authentication, JSON, the error envelope as VoiceServiceError, retries. */
export class Transport {
  private readonly baseUrl: string;
  private readonly fetchFn: FetchLike;
  private readonly maxRetries: number;
  private readonly retryDelayMs: number;
  private readonly maxRetryDelayMs: number;
  private readonly apiKey: string | undefined;

  constructor(options: ClientOptions) {
    if (!options.baseUrl) throw new TypeError("VoiceService: baseUrl is required");
    this.apiKey = options.apiKey;
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    // Bound: a browser's fetch called as a method of another object throws "Illegal invocation".
    this.fetchFn = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.maxRetries = Math.max(0, options.maxRetries ?? 2);
    this.retryDelayMs = options.retryDelayMs ?? 500;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
  }

  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const url = this.baseUrl + path + queryString(opts.query);
    const headers: Record<string, string> = { accept: "application/json", ...opts.headers };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(opts.body);
    }
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await this.fetchFn(url, { method, headers, body, signal: opts.signal });
      } catch (cause) {
        if (opts.signal?.aborted) throw cause;
        throw new VoiceServiceError({
          status: 0,
          code: "connection_error",
          message: `${method} ${path}: no answer (${cause instanceof Error ? cause.message : String(cause)})`,
          cause,
        });
      }
      if (res.ok) return (await res.json()) as T;
      const error = await VoiceServiceError.fromResponse(res);
      const delay = this.retryDelay(error, attempt, opts.retry === true);
      if (delay === null) throw error;
      await sleep(delay, opts.signal);
    }
  }

  /** Milliseconds to wait before trying again, or null to give up with the error. */
  private retryDelay(error: VoiceServiceError, attempt: number, safe: boolean): number | null {
    if (!safe || !RETRYABLE_STATUSES.has(error.status) || attempt >= this.maxRetries) return null;
    if (error.retryAfter !== undefined) {
      const ms = error.retryAfter * 1000;
      return ms <= this.maxRetryDelayMs ? ms : null;
    }
    // Exponential backoff with jitter, so that clients refused together do not return together.
    const ceiling = Math.min(this.maxRetryDelayMs, this.retryDelayMs * 2 ** attempt);
    return Math.round(ceiling * (0.5 + Math.random() / 2));
  }
}

function queryString(query: RequestOptions["query"]): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null) params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

/** `/api/v1/calls/{id}` with each `{name}` replaced by its encoded value. */
export function pathOf(template: string, params: Record<string, string>): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined || value === "") throw new TypeError(`VoiceService: ${name} is required`);
    return encodeURIComponent(value);
  });
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
