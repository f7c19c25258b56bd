import { createHmac } from "node:crypto";
import type { Server } from "bun";

/**
 * A local webhook receiver: a real HTTP server that records every request and answers each path from
 * a script of statuses (then 200), or never (`/hang…` paths), as receivers in the wild do.
 */

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  /** When it arrived (Date.now()). */
  at: number;
}

export interface WebhookReceiver {
  url(path: string): string;
  received: Received[];
  at(path: string): Received[];
  script(path: string, statuses: number[]): void;
  stop(): void;
}

export function startWebhookReceiver(): WebhookReceiver {
  const received: Received[] = [];
  const scripts = new Map<string, number[]>();
  const server: Server<undefined> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      received.push({
        path,
        headers: Object.fromEntries(req.headers),
        body: await req.text(),
        at: Date.now(),
      });
      if (path.startsWith("/hang")) return new Promise<Response>(() => {});
      const status = scripts.get(path)?.shift() ?? 200;
      return new Response(null, { status, headers: status === 302 ? { location: "/elsewhere" } : {} });
    },
  });
  return {
    url: (path: string) => `http://127.0.0.1:${server.port}${path}`,
    received,
    at: (path: string) => received.filter((r) => r.path === path),
    script: (path: string, statuses: number[]) => scripts.set(path, statuses),
    stop: () => server.stop(true),
  };
}

/** The Standard Webhooks signature, computed here independently of the service. */
export function expectedSignature(secret: string, id: string, timestamp: string, body: string): string {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64")}`;
}
