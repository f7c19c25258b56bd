import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { adminOperations } from "../../src/admin/operations.ts";
import { runAdmin } from "../../src/cli/admin.ts";
import type { TestContext } from "../helpers/app.ts";
import { admin, createAdminTestContext } from "./support.ts";

/**
 * `voice-service admin …` does the same as the admin API. An id the command acts on is
 * checked exactly as the route checks its path: at the same step (after a read's query, before a
 * write's body), with the same code, message and param.
 */

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createAdminTestContext();
});
afterAll(() => ctx.close());

interface Case {
  /** The command line, with `ID` where the id goes. */
  argv: string[];
  method: string;
  /** The path under /api/admin/v1, with `ID` where the id goes. */
  path: string;
  json?: unknown;
}

/** For every operation that takes an id: a request whose input is wrong too (or that has no input). */
const withBadInput: Record<string, Case> = {
  "update-organization": {
    argv: ["update-organization", "ID", "--plan-minutes", "-4"],
    method: "PATCH",
    path: "/organizations/ID",
    json: { planMinutes: -4 },
  },
  "get-organization": { argv: ["get-organization", "ID"], method: "GET", path: "/organizations/ID" },
  "create-agent": {
    argv: ["create-agent", "--organization", "ID", "--name", ""],
    method: "POST",
    path: "/organizations/ID/agents",
    json: { name: "" },
  },
  "update-agent": {
    argv: ["update-agent", "ID", "--language", "fr_CA"],
    method: "PATCH",
    path: "/agents/ID",
    json: { language: "fr_CA" },
  },
  "list-agents": {
    argv: ["list-agents", "--organization", "ID"],
    method: "GET",
    path: "/organizations/ID/agents",
  },
  "create-secret-key": {
    argv: ["create-secret-key", "--organization", "ID", "--mode", "root", "--scopes", "*"],
    method: "POST",
    path: "/organizations/ID/secret-keys",
    json: { mode: "root", scopes: ["*"] },
  },
  "create-publishable-key": {
    argv: [
      "create-publishable-key",
      "--organization",
      "ID",
      "--agent",
      "nope",
      "--origins",
      "http://shop.example.com",
      "--monthly-minute-cap",
      "0",
    ],
    method: "POST",
    path: "/organizations/ID/publishable-keys",
    json: { agentId: "nope", allowedOrigins: ["http://shop.example.com"], monthlyMinuteCap: 0 },
  },
  "list-secret-keys": {
    argv: ["list-secret-keys", "--organization", "ID"],
    method: "GET",
    path: "/organizations/ID/secret-keys",
  },
  "list-publishable-keys": {
    argv: ["list-publishable-keys", "--organization", "ID"],
    method: "GET",
    path: "/organizations/ID/publishable-keys",
  },
  "revoke-secret-key": { argv: ["revoke-secret-key", "ID"], method: "POST", path: "/secret-keys/ID/revoke" },
  "revoke-publishable-key": {
    argv: ["revoke-publishable-key", "ID"],
    method: "POST",
    path: "/publishable-keys/ID/revoke",
  },
  "publishable-key-stats": {
    argv: ["publishable-key-stats", "ID"],
    method: "GET",
    path: "/publishable-keys/ID/stats",
  },
  "create-knowledge-base": {
    argv: ["create-knowledge-base", "--organization", "ID", "--name", ""],
    method: "POST",
    path: "/organizations/ID/knowledge-bases",
    json: { name: "" },
  },
  "update-knowledge-base": {
    argv: ["update-knowledge-base", "ID", "--name", ""],
    method: "PATCH",
    path: "/knowledge-bases/ID",
    json: { name: "" },
  },
  "retry-failed-timer": {
    argv: ["retry-failed-timer", "ID"],
    method: "POST",
    path: "/failed-timers/ID/retry",
  },
};

type ErrorFields = { code: string; message: string; param?: string };

/** The CLI's answer and the API's to the same request, as {code, message, param}. */
async function bothFaces(
  c: Case,
  id: string,
): Promise<{ cli: ErrorFields | null; http: ErrorFields | null }> {
  const cliRun = await runAdmin(
    c.argv.map((a) => (a === "ID" ? id : a)),
    ctx.deps,
  );
  const cli = cliRun.code === 0 ? null : (JSON.parse(cliRun.stderr).error as ErrorFields);
  const res = await admin(ctx, c.method, c.path.replace("ID", encodeURIComponent(id)), {
    ...(c.json !== undefined ? { json: c.json } : {}),
  });
  let http: ErrorFields | null = null;
  if (res.status >= 400) {
    const { code, message, param } = res.body.error as ErrorFields;
    http = { code, message, ...(param !== undefined ? { param } : {}) };
  }
  return { cli, http };
}

/** An id of another kind than the operation's: well formed, but never the object sought. */
function otherKindOfId(prefix: string): string {
  return `${prefix === "org" ? "agt" : "org"}_01JD8Y3M6W9Q2T4V5X7Z8A9B0C`;
}

describe("an id that cannot be the object's", () => {
  test("every operation that takes an id has a case here", () => {
    const withId = adminOperations.filter((op) => op.id).map((op) => op.name);
    expect(Object.keys(withBadInput).sort()).toEqual(withId.sort());
  });

  for (const op of adminOperations.filter((o) => o.id)) {
    test(`${op.name}: a malformed id answers as the API does, whatever the input`, async () => {
      const c = withBadInput[op.name]!;
      for (const id of [
        "banana",
        otherKindOfId(op.id!.prefix),
        `${op.id!.prefix}_x`,
        "ORG_01JD8Y3M6W9Q2T4V5X7Z8A9B0C",
      ]) {
        const { cli, http } = await bothFaces(c, id);
        expect({ id, http }).toEqual({ id, http: { code: "not_found", message: "No such object." } });
        expect({ id, cli }).toEqual({ id, cli: http });
      }
    });
  }

  test("with a valid body, a malformed id is the API's message, not the service's", async () => {
    const update = await bothFaces(
      {
        argv: ["update-organization", "ID", "--name", "X"],
        method: "PATCH",
        path: "/organizations/ID",
        json: { name: "X" },
      },
      "banana",
    );
    expect(update.cli).toEqual(update.http);
    expect(update.cli).toEqual({ code: "not_found", message: "No such object." });
  });

  test("an unknown but well-formed id is the service's answer on both faces", async () => {
    const id = "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
    const { cli, http } = await bothFaces(
      {
        argv: ["update-organization", "ID", "--name", "X"],
        method: "PATCH",
        path: "/organizations/ID",
        json: { name: "X" },
      },
      id,
    );
    expect(http?.code).toBe("not_found");
    expect(cli).toEqual(http);
    // A wrong body with a well-formed id: the body is at fault, on both faces.
    const bad = await bothFaces(withBadInput["update-organization"]!, id);
    expect(bad.http).toMatchObject({ code: "invalid_request", param: "planMinutes" });
    expect(bad.cli).toEqual(bad.http);
  });

  test("a read checks its query before the id, as the API does", async () => {
    for (const c of [
      {
        argv: ["list-agents", "--organization", "ID", "--limit", "0"],
        method: "GET",
        path: "/organizations/ID/agents?limit=0",
      },
      {
        argv: ["publishable-key-stats", "ID", "--days", "0"],
        method: "GET",
        path: "/publishable-keys/ID/stats?days=0",
      },
    ]) {
      const { cli, http } = await bothFaces(c, "banana");
      expect(http?.code).toBe("invalid_query");
      expect(cli).toEqual(http);
    }
  });
});
