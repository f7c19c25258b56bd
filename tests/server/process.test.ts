import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import net from "node:net";
import { brotliDecompressSync } from "node:zlib";
import { spawnService } from "../db/serviceProcess.ts";
import { expectApiError } from "../helpers/errors.ts";
import {
  logLines,
  SERVER_RUNTIME,
  type Seed,
  type Server,
  seed,
  serverCommand,
  startServer,
  TEST_DATABASE,
} from "./support.ts";

/** The service as a process: first start, what it serves besides the API, bodies too large, shutdown. */

let server: Server;
let s: Seed;
beforeAll(async () => {
  // An empty database: the migrations run, and the embedded database is made from nothing.
  server = await startServer({ fresh: true });
  s = await seed(server);
});
afterAll(() => server.stop());

describe(`the service on ${SERVER_RUNTIME}, ${TEST_DATABASE} database`, () => {
  test("migrates an empty database, then listens, on the runtime and database under test", () => {
    const lines = logLines(server);
    const listening = lines.find((l) => l.msg === "listening");
    expect(listening?.runtime).toStartWith(`${SERVER_RUNTIME} `);
    expect(listening?.database).toBe(TEST_DATABASE);
    const migrations = lines.filter((l) => l.msg === "migration applied").map((l) => l.migration);
    expect(migrations[0]).toBe("0001_init");
    expect(lines.indexOf(listening!)).toBeGreaterThan(lines.findIndex((l) => l.msg === "migration applied"));
    if (TEST_DATABASE === "embedded") {
      expect(lines.some((l) => l.msg === "created the embedded database")).toBe(true);
    }
  });

  test("writes JSON lines only on stdout, each with a time and a level", async () => {
    await (await server.fetch("/api/v1/agents", { key: s.liveKey })).text();
    const text = server.service.stdout();
    const lines = text.slice(0, text.lastIndexOf("\n")).split("\n");
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) {
      const parsed = JSON.parse(line);
      expect(typeof parsed.time).toBe("string");
      expect(["debug", "info", "warn", "error"]).toContain(parsed.level);
    }
  });

  test("an unknown route is a 404 in the error envelope, with X-Request-Id", async () => {
    await expectApiError(await server.fetch("/api/v1/nothing-here"), 404, "not_found");
  });

  test("serves the OpenAPI document and the docs page with its own assets, gzip and 304 included", async () => {
    const doc = await server.fetch("/api/openapi.json");
    expect(doc.status).toBe(200);
    expect((await doc.json()).openapi).toBe("3.1.0");

    const page = await server.fetch("/api/docs");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await page.text();
    const assets = [...html.matchAll(/(?:href|src)="(docs\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toHaveLength(3);
    for (const asset of assets) {
      const plain = await server.fetch(`/api/${asset}`, { headers: { "accept-encoding": "identity" } });
      expect(plain.status).toBe(200);
      const body = new Uint8Array(await plain.arrayBuffer());
      expect(body.byteLength).toBeGreaterThan(100);
      const etag = plain.headers.get("etag")!;
      const gz = await server.fetch(`/api/${asset}`, {
        headers: { "accept-encoding": "gzip" },
        decompress: false,
      });
      expect(gz.headers.get("content-encoding")).toBe("gzip");
      expect(Bun.gunzipSync(new Uint8Array(await gz.arrayBuffer()))).toEqual(body);
      const again = await server.fetch(`/api/${asset}`, { headers: { "if-none-match": etag } });
      expect(again.status).toBe(304);
    }
  });

  test("serves the prebuilt widget in each encoding, each with its ETag, and 304 when unchanged", async () => {
    for (const path of ["/widget/v1.js", "/widget/v1/media.js"]) {
      const plain = await server.fetch(path, { headers: { "accept-encoding": "identity" } });
      expect(plain.status).toBe(200);
      expect(plain.headers.get("access-control-allow-origin")).toBe("*");
      const text = await plain.text();
      expect(text.length).toBeGreaterThan(1000);
      const etags = new Set([plain.headers.get("etag")]);
      for (const encoding of ["gzip", "br"]) {
        const res = await server.fetch(path, { headers: { "accept-encoding": encoding }, decompress: false });
        expect(res.headers.get("content-encoding")).toBe(encoding);
        const bytes = new Uint8Array(await res.arrayBuffer());
        const decoded = encoding === "gzip" ? Bun.gunzipSync(bytes) : brotliDecompressSync(bytes);
        expect(new TextDecoder().decode(decoded)).toBe(text);
        etags.add(res.headers.get("etag"));
        const unchanged = await server.fetch(path, {
          headers: { "accept-encoding": encoding, "if-none-match": res.headers.get("etag")! },
        });
        expect(unchanged.status).toBe(304);
      }
      expect(etags.size).toBe(3);
    }
  });

  test.if(TEST_DATABASE === "embedded")("the demo, seeded at the first start, serves its page", async () => {
    const res = await server.fetch("/demo");
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(
      /<script src="\/widget\/v1\.js" data-session-token="inf_wcs_[A-Za-z0-9_-]+"/,
    );
  });

  test.each([
    ["with Content-Length", false],
    ["chunked", true],
  ])("a body over 64 KiB sent %s is 413 payload_too_large in the envelope", async (_name, chunked) => {
    const big = JSON.stringify({ phone: "+33612345678", name: "x".repeat(70 * 1024) });
    const body = chunked
      ? new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode(big));
            c.close();
          },
        })
      : big;
    const res = await server.fetch("/api/v1/contacts", {
      method: "POST",
      key: s.testKey,
      headers: { "content-type": "application/json" },
      body,
    });
    await expectApiError(res, 413, "payload_too_large");
  });

  test("a second process on the same port is refused with a clear error; the first keeps serving", async () => {
    const { port } = new URL(server.url);
    const second = startServer({ env: { PORT: port } });
    await expect(second).rejects.toThrow(/in use/);
    expect((await server.fetch("/api/v1/agents", { key: s.liveKey })).status).toBe(200);
  });

  test("with PORT=0 the listening line names the port whatever LOG_LEVEL says", async () => {
    const quiet = await startServer({ env: { LOG_LEVEL: "error" } });
    try {
      const lines = logLines(quiet);
      expect(lines.map((l) => l.msg)).toEqual(["listening"]);
      expect(lines[0]!.url).toBe(quiet.url);
      expect(Number(new URL(quiet.url).port)).toBeGreaterThan(0);
    } finally {
      await quiet.stop();
    }
  });

  test("an IPv6 HOST is written in brackets in the listening line, a URL that reaches the server", async () => {
    const v6 = await startServer({ env: { HOST: "::1" } });
    try {
      expect(v6.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      expect((await v6.fetch("/api/openapi.json")).status).toBe(200);
    } finally {
      await v6.stop();
    }
  });

  test.if(TEST_DATABASE === "embedded")(
    "a second process on the same DATA_DIR is refused with a clear error; the first keeps serving",
    async () => {
      const second = spawnService(["serve"], {
        command: serverCommand(),
        env: { DATA_DIR: server.dataDir!, PORT: "0", DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
      });
      expect(await second.exited).not.toBe(0);
      expect(second.output()).toContain("in use");
      expect((await server.fetch("/api/v1/agents", { key: s.liveKey })).status).toBe(200);
    },
  );
});

describe("shutdown", () => {
  test("on SIGTERM a request in flight is answered, then the process exits 0 and says it stopped", async () => {
    // A request whose body is not all sent yet: in flight when the signal arrives.
    const { port } = new URL(server.url);
    const body = JSON.stringify({ phone: "+33612345678", name: "Late" });
    const sock = net.connect(Number(port), "127.0.0.1");
    let answer = "";
    sock.on("data", (d: Buffer) => {
      answer += d.toString();
    });
    const closed = new Promise<void>((resolve) => sock.on("close", () => resolve()));
    await new Promise<void>((resolve) => sock.on("connect", () => resolve()));
    sock.write(
      `POST /api/v1/contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${s.testKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 10)}`,
    );
    // The server has read the head (and started the request) before the signal is sent (nothing shows
    // it from outside: ample time for a busy machine).
    await Bun.sleep(1_500);
    const started = performance.now();
    server.service.proc.kill("SIGTERM");
    await server.service.waitFor(/"msg":"shutting down"/, 10_000);
    sock.write(body.slice(10));
    await closed;
    expect(answer).toStartWith("HTTP/1.1 201");
    expect(await server.service.exited).toBe(0);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(logLines(server).at(-1)?.msg).toBe("stopped");
    // Nothing accepts connections any more.
    const refused = await fetch(`${server.url}/api/openapi.json`).then(
      () => "answered",
      () => "refused",
    );
    expect(refused).toBe("refused");
  });
});
