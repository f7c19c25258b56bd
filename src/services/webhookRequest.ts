import { Buffer } from "node:buffer";
import { lookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";

/**
 * One webhook request: a POST whose whole life, the host name's lookup included, fits in `timeoutMs`,
 * sent to an address that was checked — the very address the connection is made to. The lookup
 * happens once, inside the request (the `lookup` hook of node:http/https, called by the connection
 * itself), and the connection goes to the address it returned: a name that answers a public address
 * to a first lookup and a private one to a second (DNS rebinding) has no second lookup to answer. The
 * TLS certificate is still checked against the host name (SNI and verification use the URL's host),
 * and the `Host` header is the URL's.
 *
 * node:http(s) rather than fetch: fetch has no standard way to say which address to connect to. Bun
 * implements the hook (tests/webhooks/request.test.ts proves it on the runtime that runs the tests).
 */

/** All the addresses of a host name (injectable for tests). */
export type Resolve = (hostname: string) => Promise<string[]>;

/** The system's answer, IPv4 addresses first (the first one is connected to). */
export const resolveWithDns: Resolve = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true }))
    .sort((a, b) => a.family - b.family)
    .map((a) => a.address);

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  resolve: Resolve;
  /**
   * Why the connection must not go to `address` (one the host name resolved to), or null. Every
   * address of the answer is judged; the first one is connected to.
   */
  refuse(address: string): string | null;
}

export type WebhookAnswer = { status: number } | { error: string };

/** Sends the request; never throws. */
export function postWebhook(req: WebhookRequest): Promise<WebhookAnswer> {
  return new Promise((settle) => {
    let done = false;
    let request: http.ClientRequest | null = null;
    const finish = (answer: WebhookAnswer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      // Nothing more is read from the receiver; a fresh connection per request, so nothing is kept.
      request?.destroy();
      settle(answer);
    };
    const timer = setTimeout(() => finish({ error: `no answer within ${req.timeoutMs} ms` }), req.timeoutMs);
    let url: URL;
    try {
      url = new URL(req.url);
    } catch {
      finish({ error: "url is not valid" });
      return;
    }
    const hostname = url.hostname.replace(/^\[|\]$/g, "");
    // A literal address is not looked up: it is judged as it is.
    const literal = isIP(hostname) ? req.refuse(hostname) : null;
    if (literal) {
      finish({ error: literal });
      return;
    }
    const client = url.protocol === "https:" ? https : http;
    /** Why the lookup refused the host, to tell apart from a connection failure. */
    let refusal: string | null = null;
    const pinnedLookup = (
      hostname: string,
      options: { all?: boolean },
      callback: (...args: unknown[]) => void,
    ): void => {
      req.resolve(hostname).then(
        (addresses) => {
          const address = addresses[0];
          refusal = address === undefined ? "host name not found" : null;
          for (const a of addresses) refusal ??= req.refuse(a);
          if (refusal || address === undefined) {
            callback(Object.assign(new Error(refusal ?? "host name not found"), { code: "EREFUSED" }));
            return;
          }
          const family = isIP(address) === 6 ? 6 : 4;
          if (options?.all) callback(null, [{ address, family }]);
          else callback(null, address, family);
        },
        () => {
          refusal = "host name not found";
          callback(Object.assign(new Error("host name not found"), { code: "ENOTFOUND" }));
        },
      );
    };
    try {
      request = client.request(
        {
          protocol: url.protocol,
          hostname,
          port: url.port || (url.protocol === "https:" ? 443 : 80),
          path: `${url.pathname}${url.search}`,
          method: "POST",
          headers: { ...req.headers, "content-length": String(Buffer.byteLength(req.body)) },
          // No pooled connection: one made earlier could lead to an address checked earlier.
          agent: false,
          lookup: pinnedLookup as never,
        },
        (res) => {
          res.resume();
          finish({ status: res.statusCode ?? 0 });
        },
      );
      request.on("error", (err: NodeJS.ErrnoException) => {
        finish({ error: refusal ?? (err.code ? `request failed (${err.code})` : "request failed") });
      });
      request.end(req.body);
    } catch {
      finish({ error: "request failed" });
    }
  });
}
