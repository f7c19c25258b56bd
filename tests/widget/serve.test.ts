import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { chooseEncoding } from "../../src/http/contentNegotiation.ts";
import { createTestContext, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

const get = (path: string, headers: Record<string, string> = {}, method = "GET") =>
  ctx.request(path, { method, headers });

describe("GET /widget/v1.js and /widget/v1/media.js", () => {
  for (const path of ["/widget/v1.js", "/widget/v1/media.js"]) {
    test(`${path}: JavaScript for any origin, cached five minutes, with an ETag`, async () => {
      const res = await get(path, { "accept-encoding": "gzip, deflate, br" });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("cache-control")).toBe("public, max-age=300");
      expect(res.headers.get("vary")).toBe("Accept-Encoding");
      expect(res.headers.get("content-encoding")).toBe("br");
      expect(res.headers.get("etag")).toMatch(/^"[A-Za-z0-9_-]{22}-br"$/);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    });

    test(`${path}: brotli, gzip and plain bodies are the same file`, async () => {
      const plain = await get(path, { "accept-encoding": "identity" });
      expect(plain.headers.get("content-encoding")).toBeNull();
      const text = await plain.text();
      expect(plain.headers.get("content-length")).toBe(String(new TextEncoder().encode(text).byteLength));
      const br = await get(path, { "accept-encoding": "br" });
      const brBytes = new Uint8Array(await br.arrayBuffer());
      expect(Number(br.headers.get("content-length"))).toBe(brBytes.byteLength);
      expect(brotliDecompressSync(brBytes).toString()).toBe(text);
      const gz = await get(path, { "accept-encoding": "gzip" });
      expect(gz.headers.get("content-encoding")).toBe("gzip");
      expect(gunzipSync(new Uint8Array(await gz.arrayBuffer())).toString()).toBe(text);
      expect(brBytes.byteLength).toBeLessThan(text.length / 2);
    });

    test(`${path}: If-None-Match with a current ETag is 304 without a body`, async () => {
      const first = await get(path, { "accept-encoding": "gzip" });
      const etag = first.headers.get("etag")!;
      for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
        const res = await get(path, { "accept-encoding": "gzip", "if-none-match": inm });
        expect(res.status).toBe(304);
        expect(await res.text()).toBe("");
        expect(res.headers.get("etag")).toBe(etag);
        expect(res.headers.get("access-control-allow-origin")).toBe("*");
        expect(res.headers.get("cache-control")).toBe("public, max-age=300");
      }
      const stale = await get(path, { "accept-encoding": "gzip", "if-none-match": '"old-etag"' });
      expect(stale.status).toBe(200);
    });
  }

  test("the ETag follows the encoding, and a validator of any encoding revalidates", async () => {
    const br = (await get("/widget/v1.js", { "accept-encoding": "br" })).headers.get("etag")!;
    const gz = (await get("/widget/v1.js", { "accept-encoding": "gzip" })).headers.get("etag")!;
    const plain = (await get("/widget/v1.js")).headers.get("etag")!;
    expect(new Set([br, gz, plain]).size).toBe(3);
    const res = await get("/widget/v1.js", { "accept-encoding": "br", "if-none-match": gz });
    expect(res.status).toBe(304);
    expect(res.headers.get("etag")).toBe(br);
  });

  test("v1.js is a classic script defining ServiceWidget; media.js is an ES module with the media client", async () => {
    const v1 = await (await get("/widget/v1.js")).text();
    expect(v1).toContain("ServiceWidget");
    expect(v1).not.toMatch(/^\s*(import|export)\s/m);
    const media = await (await get("/widget/v1/media.js")).text();
    expect(media).toMatch(/export\s*\{[^}]*joinCall/);
    expect(media).toContain("RTCPeerConnection");
  });

  test("HEAD answers the headers without a body", async () => {
    const res = await get("/widget/v1.js", { "accept-encoding": "br" }, "HEAD");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-encoding")).toBe("br");
    expect(Number(res.headers.get("content-length"))).toBeGreaterThan(1000);
    expect(await res.text()).toBe("");
  });

  test("other paths under /widget are 404 in the error envelope", async () => {
    const res = await get("/widget/v2.js");
    await expectApiError(res, 404, "not_found");
  });
});

describe("Accept-Encoding", () => {
  test("brotli first, gzip next, plain otherwise; q=0 refuses", () => {
    expect(chooseEncoding("gzip, deflate, br, zstd")).toBe("br");
    expect(chooseEncoding("gzip")).toBe("gzip");
    expect(chooseEncoding("br;q=0, gzip")).toBe("gzip");
    expect(chooseEncoding("br;q=0.5, gzip;q=0.8")).toBe("gzip");
    expect(chooseEncoding("*")).toBe("br");
    expect(chooseEncoding("*;q=0, gzip")).toBe("gzip");
    expect(chooseEncoding("identity")).toBe("identity");
    expect(chooseEncoding("")).toBe("identity");
    expect(chooseEncoding(undefined)).toBe("identity");
    expect(chooseEncoding("gzip;q=0")).toBe("identity");
  });
});
