import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedDemo } from "../../src/services/demo.ts";
import { findSessionToken } from "../../src/services/sessionTokens.ts";
import { createTestContext, type TestContext } from "../helpers/app.ts";

/** The /demo page itself, in process (the browser run of it is in demo.test.ts). */

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

const TOKEN_ATTRIBUTE = /data-session-token="(inf_wcs_[A-Za-z0-9_-]+)"/;

describe("GET /demo", () => {
  test("without a demo organization: a friendly 404 page under the same strict headers", async () => {
    const res = await ctx.request("/demo");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await res.text();
    expect(html).toContain("No demo here");
    expect(html).not.toContain("data-session-token");
    expect(html).not.toContain("<script");
  });

  test("with the demo: one fresh single-use test token per load, strict CSP, no inline code, no key", async () => {
    const demo = await seedDemo(ctx.deps);
    expect(demo).not.toBeNull();
    const first = await ctx.request("/demo");
    expect(first.status).toBe(200);
    expect(first.headers.get("cache-control")).toBe("no-store");
    const csp = first.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("unsafe-eval");
    const html = await first.text();
    // Every <script> loads a file and every style is a served file: nothing inline for the CSP to allow.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|style=/);
    expect(html).toContain('<link rel="stylesheet" href="/demo/demo.css">');
    expect(html).toContain('src="/widget/v1.js"');
    expect(html).not.toContain(demo!.testSecretKey);
    expect(html).not.toMatch(/inf_(sk|pk)_/);

    const token = TOKEN_ATTRIBUTE.exec(html)?.[1];
    expect(token).toBeDefined();
    const record = await findSessionToken(ctx.deps.sql, token, ctx.deps.clock);
    expect(record).not.toBeNull();
    expect(record!.organizationId).toBe(demo!.organizationId);
    expect(record!.agentId).toBe(demo!.agentId);
    expect(record!.livemode).toBe(false);

    const second = TOKEN_ATTRIBUTE.exec(await (await ctx.request("/demo")).text())?.[1];
    expect(second).toBeDefined();
    expect(second).not.toBe(token);
  });

  test("?lang=fr gives the French page and widget; anything else is English", async () => {
    const fr = await (await ctx.request("/demo?lang=fr")).text();
    expect(fr).toContain('<html lang="fr">');
    expect(fr).toContain('data-lang="fr"');
    expect(fr).toContain("<h1>Démo d&#39;appel web</h1>");
    const other = await (await ctx.request("/demo?lang=%3Cb%3E")).text();
    expect(other).toContain('<html lang="en">');
    expect(other).not.toContain("<b>");
  });

  test("the demo's test key revoked: no token can be minted, so no demo (404)", async () => {
    await ctx.deps.sql`update secret_keys set revoked_at = now()`;
    const res = await ctx.request("/demo");
    expect(res.status).toBe(404);
    expect(await res.text()).toContain("No demo here");
    await ctx.deps.sql`update secret_keys set revoked_at = null`;
  });

  test("the stylesheet is served as CSS", async () => {
    const res = await ctx.request("/demo/demo.css");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect(await res.text()).toContain("#call");
  });
});

describe("GET /demo mints at most a few tokens per visitor address per minute", () => {
  test("the 6th load within a minute from one address is 429 with Retry-After, and mints nothing", async () => {
    await ctx.deps.sql`truncate organizations, settings cascade`;
    expect(await seedDemo(ctx.deps)).not.toBeNull();
    const address = "203.0.113.50";
    const load = (from: string) => ctx.request("/demo", { remoteAddress: from });
    for (let i = 0; i < 5; i++) expect((await load(address)).status).toBe(200);
    const tokens = async () =>
      (await ctx.deps.sql<{ n: number }[]>`select count(*)::int as n from session_tokens`)[0]!.n;
    const before = await tokens();
    const refused = await load(address);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get("content-security-policy")).toContain("default-src 'none'");
    const html = await refused.text();
    expect(html).toContain("Too many demo calls");
    expect(html).not.toContain("data-session-token");
    expect(await tokens()).toBe(before);
    // Another visitor is not held back.
    expect((await load("203.0.113.51")).status).toBe(200);
  });

  test("IPv6 visitors are counted by their /64, as web calls are: one allocation is one visitor", async () => {
    await ctx.deps.sql`truncate organizations, settings cascade`;
    expect(await seedDemo(ctx.deps)).not.toBeNull();
    const load = (from: string) => ctx.request("/demo", { remoteAddress: from });
    // Five loads from addresses of one /64, then a sixth from yet another of them.
    for (let i = 1; i <= 5; i++) expect((await load(`2001:db8:7:1::${i}`)).status).toBe(200);
    expect((await load("2001:db8:7:1:ffff:ffff:ffff:ffff")).status).toBe(429);
    // The next /64 is another visitor.
    expect((await load("2001:db8:7:2::1")).status).toBe(200);
  });
});
