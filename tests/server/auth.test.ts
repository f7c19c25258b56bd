import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { type Seed, type Server, seed, startServer } from "./support.ts";

/** Who may call what, over HTTP: secret keys, scopes, agent restrictions, revocation, the admin token. */

let server: Server;
let s: Seed;
beforeAll(async () => {
  server = await startServer();
  s = await seed(server);
});
afterAll(() => server.stop());

const secretKey = (body: Record<string, unknown>) =>
  server.admin<{ id: string; key: string }>("POST", `/organizations/${s.org.id}/secret-keys`, body);

describe("secret keys", () => {
  test("a missing, malformed or unknown key, another scheme or a publishable key is 401 invalid_key", async () => {
    const authorizations = [
      null,
      "Bearer ",
      "Bearer garbage",
      s.liveKey,
      `Basic ${btoa(`${s.liveKey}:`)}`,
      `Bearer inf_live_${"A".repeat(43)}`,
      `Bearer ${s.publishable.key}`,
    ];
    for (const authorization of authorizations) {
      for (const path of ["/api/v1/agents", "/api/v1/contacts", "/api/v1/events"]) {
        const res = await server.fetch(path, { headers: authorization ? { authorization } : {} });
        await expectApiError(res, 401, "invalid_key", { label: `${path} with ${authorization}` });
      }
    }
  });

  test("a valid key reads its organization's agents", async () => {
    const res = await server.fetch("/api/v1/agents", { key: s.liveKey });
    expect(res.status).toBe(200);
    const { agents } = (await res.json()) as { agents: { id: string; name: string; active: boolean }[] };
    expect(agents.map(({ id, name, active }) => ({ id, name, active }))).toEqual([
      { id: s.agent.id, name: "Reception", active: true },
    ]);
  });

  test("a key revoked through the admin API is refused at once", async () => {
    const key = await secretKey({ mode: "live", scopes: ["*"] });
    expect((await server.fetch("/api/v1/agents", { key: key.key })).status).toBe(200);
    const revoked = await server.admin<{ revoked: boolean }>("POST", `/secret-keys/${key.id}/revoke`);
    expect(revoked.revoked).toBe(true);
    expect(await outcomeOf(await server.fetch("/api/v1/agents", { key: key.key }))).toBe("401 invalid_key");
  });

  test("a key holds only its scopes: 403 missing_scope for the others", async () => {
    const reader = await secretKey({ mode: "test", scopes: ["contacts:read"] });
    expect((await server.fetch("/api/v1/contacts", { key: reader.key })).status).toBe(200);
    const write = await server.fetch("/api/v1/contacts", {
      method: "POST",
      key: reader.key,
      json: { phone: "+33612345678" },
    });
    expect(await outcomeOf(write)).toBe("403 missing_scope");
    expect(await outcomeOf(await server.fetch("/api/v1/agents", { key: reader.key }))).toBe(
      "403 missing_scope",
    );
  });

  test("a key restricted to some agents is 403 agent_not_allowed for the others", async () => {
    const second = await server.admin<{ id: string }>("POST", `/organizations/${s.org.id}/agents`, {
      name: "Sales",
    });
    const restricted = await secretKey({ mode: "test", scopes: ["*"], agentIds: [s.agent.id] });
    const mint = (agentId: string) =>
      server.fetch("/api/v1/web-call-sessions", { method: "POST", key: restricted.key, json: { agentId } });
    expect(await outcomeOf(await mint(s.agent.id))).toBe("201 ok");
    expect(await outcomeOf(await mint(second.id))).toBe("403 agent_not_allowed");
  });

  test("a test key never reads a live resource, nor a live key a test one", async () => {
    const mint = await server.fetch("/api/v1/web-call-sessions", {
      method: "POST",
      key: s.testKey,
      json: { agentId: s.agent.id },
    });
    const { token } = await mint.json();
    const call = await (
      await server.fetch("/api/v1/web-calls", { method: "POST", json: { sessionToken: token } })
    ).json();
    expect((await server.fetch(`/api/v1/calls/${call.callId}`, { key: s.testKey })).status).toBe(200);
    expect(await outcomeOf(await server.fetch(`/api/v1/calls/${call.callId}`, { key: s.liveKey }))).toBe(
      "404 not_found",
    );
  });
});

describe("the admin API", () => {
  test("without the token, or with another, every operation is 401 invalid_key and nothing is made", async () => {
    for (const authorization of [
      null,
      "Bearer nope",
      `Bearer ${server.adminToken}x`,
      `Bearer ${s.liveKey}`,
    ]) {
      const res = await server.fetch("/api/admin/v1/organizations", {
        method: "POST",
        headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
        body: JSON.stringify({ name: "Intruder" }),
      });
      await expectApiError(res, 401, "invalid_key", { label: String(authorization) });
    }
    const orgs = await server
      .admin<{ data: { name: string }[] }>("GET", "/organizations?limit=100")
      .catch(() => null);
    if (orgs) expect(orgs.data.map((o) => o.name)).not.toContain("Intruder");
  });

  test("bad input is 400 invalid_request naming the field", async () => {
    const res = await server.fetch(`/api/admin/v1/organizations/${s.org.id}/secret-keys`, {
      method: "POST",
      key: server.adminToken,
      json: { mode: "sometimes", scopes: ["*"] },
    });
    await expectApiError(res, 400, "invalid_request", { param: "mode" });
  });
});

describe("secrets stay out of the logs", () => {
  test("no key, token or admin token appears in anything the process wrote", async () => {
    const output = server.service.output();
    expect(output).toContain('"msg":"request"');
    for (const secret of [s.liveKey, s.testKey, s.publishable.key, server.adminToken]) {
      expect(output).not.toContain(secret);
    }
  });
});
