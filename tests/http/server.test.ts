import { afterAll, describe, expect, test } from "bun:test";
import net from "node:net";
import type { Context } from "hono";
import { serve } from "../../src/runtime/bun.ts";
import type { RunningServer } from "../../src/runtime/runtime.ts";
import { createTestContext, seedOrganization } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";
import { addFixtureWriteRoute } from "../helpers/openapi.ts";

/** The app behind the real Bun server, over TCP: what the tests through app.fetch cannot see. */

const ctx = await createTestContext();
addFixtureWriteRoute(ctx.app, ctx.deps);

/** A request that waits for the test to let it finish: an in-flight request during shutdown. */
let slowEntered = Promise.withResolvers<void>();
let slowRelease = Promise.withResolvers<void>();
ctx.app.get("/api/v1/test-fixtures/slow", async (c) => {
  slowEntered.resolve();
  await slowRelease.promise;
  return c.json({ finished: true });
});
ctx.app.get("/api/v1/test-fixtures/peer", (c: Context) =>
  c.json({ remoteAddress: c.env?.remoteAddress ?? null }),
);
ctx.app.get("/api/v1/test-fixtures/boom-value", () => {
  throw "a thrown string";
});

const seed = await seedOrganization(ctx);
const server = serve(ctx.app.fetch, { port: 0, hostname: "127.0.0.1" });
const base = `http://127.0.0.1:${server.port}`;
afterAll(async () => {
  await server.stop();
  await ctx.close();
});

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * One HTTP/1.1 exchange on a fresh socket, written by hand so the test controls Content-Length and
 * chunking. `body` is written in 64 KiB pieces; the server may answer (and close) before it is all sent.
 */
function rawRequest(port: number, head: string, body?: { total: number; chunked: boolean }) {
  return new Promise<RawResponse>((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = Buffer.alloc(0);
    let settled = false;
    const finish = () => {
      const text = buf.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return false;
      const [statusLine = "", ...lines] = text.slice(0, end).split("\r\n");
      const headers: Record<string, string> = {};
      for (const l of lines)
        headers[l.slice(0, l.indexOf(":")).toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
      const length = Number(headers["content-length"] ?? Number.NaN);
      const rest = buf.subarray(end + 4);
      if (!Number.isNaN(length) && rest.length < length) return false;
      settled = true;
      sock.destroy();
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body: rest.toString("utf8") });
      return true;
    };
    sock.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      finish();
    });
    sock.on("close", () => {
      if (!settled && !finish()) reject(new Error(`connection closed before an answer: ${buf.toString()}`));
    });
    // The server may close while the body is still being written: the answer already read is what counts.
    sock.on("error", (err) => {
      if (!settled && !finish() && buf.length === 0) reject(err);
    });
    sock.write(head);
    if (!body) return;
    const piece = Buffer.alloc(64 * 1024, "a");
    let sent = 0;
    const pump = () => {
      while (sent < body.total && !sock.destroyed) {
        sent += piece.length;
        const data = body.chunked
          ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")])
          : piece;
        if (!sock.write(data)) return void sock.once("drain", pump);
      }
      if (body.chunked && !sock.destroyed) sock.write("0\r\n\r\n");
    };
    pump();
  });
}

describe("the Bun server", () => {
  test("answers over TCP, with X-Request-Id on every answer", async () => {
    const ok = await fetch(`${base}/api/v1/agents`, { headers: { authorization: `Bearer ${seed.liveKey}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-request-id")).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect((await ok.json()).agents).toHaveLength(1);
    const refused = await fetch(`${base}/api/v1/agents`);
    await expectApiError(refused, 401, "invalid_key");
  });

  test("gives the app the socket's peer address, never a client header", async () => {
    const res = await fetch(`${base}/api/v1/test-fixtures/peer`, {
      headers: { "x-forwarded-for": "203.0.113.7", "x-real-ip": "203.0.113.8" },
    });
    expect(await res.json()).toEqual({ remoteAddress: "127.0.0.1" });
  });

  test("a thrown non-Error is a JSON 500, never the runtime's error page", async () => {
    const res = await fetch(`${base}/api/v1/test-fixtures/boom-value`);
    await expectApiError(res, 500, "internal_error");
  });

  test.each([
    ["with Content-Length", false],
    ["chunked, without Content-Length", true],
  ])("a 3 MiB body sent %s is a JSON 413 payload_too_large", async (_name, chunked) => {
    const total = 3 * 1024 * 1024;
    const head =
      `POST /api/v1/test-fixtures/call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C/echo HTTP/1.1\r\nHost: localhost\r\n` +
      `Authorization: Bearer ${seed.liveKey}\r\nContent-Type: application/json\r\n` +
      `${chunked ? "Transfer-Encoding: chunked" : `Content-Length: ${total}`}\r\n\r\n`;
    const res = await rawRequest(server.port, head, { total, chunked });
    await expectApiError(new Response(res.body, res), 413, "payload_too_large");
  });

  test("logs one JSON line per request, with no query string and no secret", async () => {
    const token = `inf_wcs_${"T".repeat(43)}`;
    const query = `?api_key=${seed.liveKey}&sessionToken=${token}&limit=5`;
    const secretHeaders = {
      authorization: `Bearer ${seed.liveKey}`,
      "x-session-token": token,
      cookie: `k=${token}`,
    };
    const before = ctx.logs.length;
    await (await fetch(`${base}/api/v1/agents${query}`, { headers: secretHeaders })).text();
    await (await fetch(`${base}/api/v1/nope${query}`, { headers: secretHeaders })).text();
    await (
      await fetch(`${base}/api/v1/test-fixtures/call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C/echo${query}`, {
        method: "POST",
        headers: { ...secretHeaders, "content-type": "application/json" },
        body: JSON.stringify({ agentId: seed.agent.id, padding: `${seed.liveKey} ${token}` }),
      })
    ).text();
    const lines = ctx.logs.slice(before);
    const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === "request");
    expect(requests.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual([
      "GET /api/v1/agents 200",
      "GET /api/v1/nope 404",
      "POST /api/v1/test-fixtures/call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C/echo 201",
    ]);
    for (const r of requests) {
      expect(typeof r.time).toBe("string");
      expect(r.requestId).toMatch(/^req_/);
    }
    const all = lines.join("\n");
    expect(all).not.toContain("?");
    expect(all).not.toContain("api_key");
    for (const secret of [seed.liveKey, token]) {
      expect(all).not.toContain(secret);
      // Not even the random part alone.
      expect(all).not.toContain(secret.slice(9));
    }
  });
});

describe("graceful shutdown", () => {
  let second: RunningServer;

  test("an in-flight request completes while stop() is pending; new connections are refused", async () => {
    slowEntered = Promise.withResolvers<void>();
    slowRelease = Promise.withResolvers<void>();
    second = serve(ctx.app.fetch, { port: 0, hostname: "127.0.0.1" });
    const port = second.port;
    const inFlight = fetch(`http://127.0.0.1:${port}/api/v1/test-fixtures/slow`);
    await slowEntered.promise;

    let stopped = false;
    const stopping = second.stop().then(() => {
      stopped = true;
    });
    await Bun.sleep(50);
    expect(stopped).toBe(false);

    const refused = await new Promise<string>((resolve) => {
      const sock = net.connect(port, "127.0.0.1");
      sock.on("connect", () => {
        sock.destroy();
        resolve("connected");
      });
      sock.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    expect(refused).toBe("ECONNREFUSED");

    slowRelease.resolve();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ finished: true });
    await stopping;
    expect(stopped).toBe(true);
  });
});
