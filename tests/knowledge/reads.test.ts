import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createSecretKey } from "../../src/services/keys.ts";
import { createKnowledgeBase } from "../../src/services/knowledgeBases.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/** Documents listed, read back whole and deleted; live objects only. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

const base = (kb = seed.kb.id) => `/api/v1/knowledge-bases/${kb}/documents`;

async function upload(title: string, text: string, kb = seed.kb.id, key = seed.liveKey) {
  const res = await ctx.request(base(kb), { method: "POST", key, json: { title, text } });
  expect(res.status).toBe(201);
  return (await res.json()) as { documentId: string; chunkCount: number };
}

const chunkRows = async (documentId: string) => {
  const [row] = await ctx.db.sql<{ n: number }[]>`
    select count(*)::int as n from document_chunks where document_id = ${documentId}`;
  return row!.n;
};

describe("read one", () => {
  test("the document with its text, put back together from its chunks", async () => {
    const paragraphs = [
      "First paragraph.   With   spaces\tand a tab.",
      `${"A long sentence that goes on. ".repeat(60)}End of the long paragraph.`,
      `${"word".repeat(300)} tail`,
      "Last one.",
    ];
    const doc = await upload("Whole", `\n\n${paragraphs.join("\n \n")}\n`);
    expect(doc.chunkCount).toBeGreaterThan(3);
    const res = await ctx.request(`${base()}/${doc.documentId}`, { key: seed.liveKey });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(Object.keys(body).sort()).toEqual([
      "chunkCount",
      "createdAt",
      "id",
      "knowledgeBaseId",
      "text",
      "title",
    ]);
    expect(body).toMatchObject({
      id: doc.documentId,
      knowledgeBaseId: seed.kb.id,
      title: "Whole",
      chunkCount: doc.chunkCount,
    });
    // Runs of whitespace become one space; paragraphs are separated by one blank line.
    expect(body.text).toBe(paragraphs.map((p) => p.replace(/\s+/g, " ").trim()).join("\n\n"));
  });

  test("Chinese text comes back exactly, cut into chunks between its sentences", async () => {
    const text = Array.from(
      { length: 150 },
      (_, i) => `这是第${i}个句子，说明退货政策${"。！？"[i % 3]}`,
    ).join("");
    const doc = await upload("退货政策", text);
    expect(doc.chunkCount).toBeGreaterThan(1);
    const body = await (await ctx.request(`${base()}/${doc.documentId}`, { key: seed.liveKey })).json();
    expect(body.text).toBe(text);
    const chunks = await ctx.db.sql<{ content: string }[]>`
      select content from document_chunks where document_id = ${doc.documentId} order by position`;
    expect(chunks.every((c) => /[。！？]$/.test(c.content))).toBe(true);
  });

  test("a test key, another knowledge base, another organization, unknown or malformed ids: 404", async () => {
    const doc = await upload("Private", "Only live keys read this.");
    const second = await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Second" });
    for (const [path, key] of [
      [`${base()}/${doc.documentId}`, seed.testKey],
      [`${base(second.id)}/${doc.documentId}`, seed.liveKey],
      [`${base()}/${doc.documentId}`, other.liveKey],
      [`${base(other.kb.id)}/${doc.documentId}`, other.liveKey],
      [`${base()}/doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C`, seed.liveKey],
      [`${base()}/doc_nope`, seed.liveKey],
      [`${base("kb_nope")}/${doc.documentId}`, seed.liveKey],
    ] as const) {
      await expectApiError(await ctx.request(path, { key }), 404, "not_found");
    }
  });
});

describe("list", () => {
  test("newest first, cursor pages, without text; every document once", async () => {
    const kb = await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Paged" });
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await upload(`Doc ${i}`, `Text ${i}.`, kb.id)).documentId);
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const res = await ctx.request(`${base(kb.id)}?limit=3${after ? `&starting_after=${after}` : ""}`, {
        key: seed.liveKey,
      });
      expect(res.status).toBe(200);
      const page = await res.json();
      for (const d of page.data) {
        expect(Object.keys(d).sort()).toEqual(["chunkCount", "createdAt", "id", "knowledgeBaseId", "title"]);
        seen.push(d.id);
      }
      if (!page.has_more) break;
      after = page.data.at(-1).id;
    }
    expect(seen).toEqual([...ids].reverse());
  });

  test("a test key lists none (test uploads store nothing); a cursor is then outside the list", async () => {
    const doc = await upload("Live", "A live document.");
    await upload("Test", "A test upload.", seed.kb.id, seed.testKey);
    const res = await ctx.request(base(), { key: seed.testKey });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ data: [], has_more: false });
    await expectApiError(
      await ctx.request(`${base()}?starting_after=${doc.documentId}`, { key: seed.testKey }),
      400,
      "invalid_cursor",
      { param: "starting_after" },
    );
  });

  test("cursor and query errors follow the convention", async () => {
    await expectApiError(
      await ctx.request(`${base()}?limit=0`, { key: seed.liveKey }),
      400,
      "invalid_query",
      { param: "limit" },
    );
    await expectApiError(await ctx.request(`${base()}?limit=`, { key: seed.liveKey }), 400, "invalid_query", {
      param: "limit",
    });
    await expectApiError(
      await ctx.request(`${base()}?starting_after=nope`, { key: seed.liveKey }),
      400,
      "invalid_query",
      { param: "starting_after" },
    );
    await expectApiError(
      await ctx.request(`${base()}?colour=red`, { key: seed.liveKey }),
      400,
      "invalid_query",
      { param: "colour" },
    );
    // Another resource's id, and a document of another knowledge base.
    await expectApiError(
      await ctx.request(`${base()}?starting_after=${seed.agent.id}`, { key: seed.liveKey }),
      400,
      "invalid_cursor",
      { param: "starting_after" },
    );
    const second = await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Elsewhere" });
    const there = await upload("There", "Elsewhere.", second.id);
    await expectApiError(
      await ctx.request(`${base()}?starting_after=${there.documentId}`, { key: seed.liveKey }),
      400,
      "invalid_cursor",
      { param: "starting_after" },
    );
  });

  test("an unknown, malformed or foreign knowledge base is 404, in both modes", async () => {
    for (const [kb, key] of [
      ["kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", seed.liveKey],
      ["kb_nope", seed.liveKey],
      [other.kb.id, seed.liveKey],
      [other.kb.id, seed.testKey],
    ] as const) {
      await expectApiError(await ctx.request(base(kb), { key }), 404, "not_found");
    }
  });
});

describe("delete", () => {
  test("200 {id, deleted: true}; the chunks go with it; then it is gone", async () => {
    const doc = await upload("Doomed", "Short lived.\n\nTwo paragraphs.");
    expect(await chunkRows(doc.documentId)).toBe(doc.chunkCount);
    const res = await ctx.request(`${base()}/${doc.documentId}`, { method: "DELETE", key: seed.liveKey });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: doc.documentId, deleted: true });
    expect(await chunkRows(doc.documentId)).toBe(0);
    await expectApiError(
      await ctx.request(`${base()}/${doc.documentId}`, { key: seed.liveKey }),
      404,
      "not_found",
    );
    await expectApiError(
      await ctx.request(`${base()}/${doc.documentId}`, { method: "DELETE", key: seed.liveKey }),
      404,
      "not_found",
    );
    const list = await (await ctx.request(`${base()}?limit=100`, { key: seed.liveKey })).json();
    expect(list.data.map((d: { id: string }) => d.id)).not.toContain(doc.documentId);
  });

  test("a test key, another organization or another knowledge base: 404 and nothing deleted", async () => {
    const doc = await upload("Kept", "Still here.");
    const second = await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Other shelf" });
    for (const [path, key] of [
      [`${base()}/${doc.documentId}`, seed.testKey],
      [`${base()}/${doc.documentId}`, other.liveKey],
      [`${base(second.id)}/${doc.documentId}`, seed.liveKey],
    ] as const) {
      await expectApiError(await ctx.request(path, { method: "DELETE", key }), 404, "not_found");
    }
    expect(await chunkRows(doc.documentId)).toBe(1);
  });

  test("deleting needs knowledge:write, reading knowledge:read", async () => {
    const doc = await upload("Scoped", "Scopes.");
    const reader = await createSecretKey(ctx.deps, seed.org.id, { mode: "live", scopes: ["knowledge:read"] });
    const writer = await createSecretKey(ctx.deps, seed.org.id, {
      mode: "live",
      scopes: ["knowledge:write"],
    });
    expect((await ctx.request(`${base()}/${doc.documentId}`, { key: reader.key })).status).toBe(200);
    expect((await ctx.request(base(), { key: reader.key })).status).toBe(200);
    await expectApiError(await ctx.request(base(), { key: writer.key }), 403, "missing_scope");
    await expectApiError(
      await ctx.request(`${base()}/${doc.documentId}`, { method: "DELETE", key: reader.key }),
      403,
      "missing_scope",
    );
    expect(
      (await ctx.request(`${base()}/${doc.documentId}`, { method: "DELETE", key: writer.key })).status,
    ).toBe(200);
  });
});
