import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { runAdmin } from "../../src/cli/admin.ts";
import { insertDocument } from "../../src/db/documents.ts";
import { chunkText } from "../../src/services/documents.ts";
import { createKnowledgeBase, updateKnowledgeBase } from "../../src/services/knowledgeBases.ts";
import { admin, createAdminTestContext } from "../admin/support.ts";
import { seedOrganization, type TestContext } from "../helpers/app.ts";
import { TEST_DATABASE } from "../helpers/db.ts";
import { expectApiError } from "../helpers/errors.ts";

/** GET /v1/knowledge-bases/{id}/search: full-text search with each knowledge base's configuration. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;
let english: string;
let french: string;
let plain: string;

beforeAll(async () => {
  ctx = await createAdminTestContext();
  seed = await seedOrganization(ctx);
  other = await seedOrganization(ctx);
  english = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Shop", language: "en-GB" })).id;
  french = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Boutique", language: "fr" })).id;
  plain = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Plain" })).id;
  await upload(
    english,
    "Hours",
    "We are open Monday to Friday.\n\nOn Saturdays we open at ten. Opening hours may change.",
  );
  await upload(english, "Parking", "Parking is free behind the shop on Saturdays.");
  await upload(english, "Returns", "Items can be returned within thirty days.");
  await upload(
    french,
    "Horaires",
    "Nous sommes ouverts du lundi au vendredi.\n\nLe samedi, la boutique ouvre à dix heures.",
  );
  await upload(plain, "Horaires", "Nous sommes ouverts du lundi au vendredi.");
  await upload(plain, "Running", "The team is running late.");
});
afterAll(() => ctx.close());

async function upload(kb: string, title: string, text: string, key = seed.liveKey) {
  const res = await ctx.request(`/api/v1/knowledge-bases/${kb}/documents`, {
    method: "POST",
    key,
    json: { title, text },
  });
  expect(res.status).toBe(201);
  return (await res.json()).documentId as string;
}

type Result = { documentId: string; title: string; chunkIndex: number; text: string; score: number };

async function search(kb: string, query: string, key = seed.liveKey) {
  const res = await ctx.request(`/api/v1/knowledge-bases/${kb}/search?${query}`, { key });
  const body = await res.clone().json();
  return { res, status: res.status, body, results: (body.results ?? []) as Result[] };
}

const q = (text: string, extra = "") => `q=${encodeURIComponent(text)}${extra}`;

describe("ranking and languages", () => {
  test("English: stemmed words; a chunk holding more of them ranks first; the answer's shape", async () => {
    const { status, body, results } = await search(english, q("Saturday opening"));
    expect(status).toBe(200);
    expect(body.livemode).toBe(true);
    expect(results.map((r) => r.title)).toEqual(["Hours", "Parking"]);
    expect(results[0]).toMatchObject({ title: "Hours", chunkIndex: 0 });
    expect(results[0]!.text).toContain("On Saturdays we open at ten.");
    for (const r of results) {
      expect(Object.keys(r).sort()).toEqual(["chunkIndex", "documentId", "score", "text", "title"]);
      expect(r.score).toBeGreaterThan(0);
      expect(r.score).toBeLessThan(1);
    }
    expect(results[0]!.score).toBeGreaterThan(results[1]!.score);
  });

  test("French: `ouvert` finds `ouverts`, `samedis` finds `samedi`; stop words are dropped", async () => {
    const { results } = await search(french, q("ouvert le samedis"));
    expect(results).toHaveLength(1);
    expect(results[0]!.title).toBe("Horaires");
    expect((await search(french, q("le la du"))).results).toEqual([]);
  });

  test("no language: words as written, nothing stemmed, no stop words", async () => {
    expect((await search(plain, q("ouvert"))).results).toEqual([]);
    expect((await search(plain, q("ouverts"))).results.map((r) => r.title)).toEqual(["Horaires"]);
    expect((await search(plain, q("runs"))).results).toEqual([]);
    expect((await search(plain, q("the"))).results.map((r) => r.title)).toEqual(["Running"]);
  });

  test("only another knowledge base's documents never come back", async () => {
    expect((await search(english, q("ouverts vendredi"))).results).toEqual([]);
    expect((await search(other.kb.id, q("Saturday"), other.liveKey)).results).toEqual([]);
  });

  test("stop words only, punctuation or query syntax: 200 and no error", async () => {
    for (const text of ["the of and", "&&& ||| !!!", "it's 'quoted' (test) <-> :*", "   "]) {
      const { status, body } = await search(english, q(text));
      expect(status).toBe(200);
      expect(Array.isArray(body.results)).toBe(true);
    }
  });

  test("limit: default 5, at most what was asked", async () => {
    const kb = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Many", language: "en" })).id;
    for (let i = 0; i < 8; i++) await upload(kb, `Note ${i}`, `A note about the garden, number ${i}.`);
    expect((await search(kb, q("garden"))).results).toHaveLength(5);
    expect((await search(kb, q("garden", "&limit=2"))).results).toHaveLength(2);
    expect((await search(kb, q("garden", "&limit=20"))).results).toHaveLength(8);
    // Equal scores: the newer document first.
    expect((await search(kb, q("garden", "&limit=3"))).results.map((r) => r.title)).toEqual([
      "Note 7",
      "Note 6",
      "Note 5",
    ]);
  });

  test("Chinese: a word inside a clause written without spaces is found (pairs of characters on both sides)", async () => {
    const kb = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "退货", language: "zh-CN" })).id;
    await upload(kb, "退货政策", "说明退货政策。商品可在三十天内退货，请保留发票。");
    await upload(kb, "营业时间", "我们周一至周五营业。");
    expect((await search(kb, q("退货"))).results.map((r) => r.title)).toEqual(["退货政策"]);
    expect((await search(kb, q("怎么退货？"))).results.map((r) => r.title)).toEqual(["退货政策"]);
    expect((await search(kb, q("营业"))).results.map((r) => r.title)).toEqual(["营业时间"]);
    // Any pair is enough (as any word is): each document holds one of these.
    const either = (await search(kb, q("发票和营业"))).results.map((r) => r.title);
    expect(either.sort()).toEqual(["营业时间", "退货政策"].sort());
    expect((await search(kb, q("快递"))).results).toEqual([]);
    // A single character is looked for as a word of its own (as the document says): only where it stands alone.
    expect((await search(kb, q("票"))).results).toEqual([]);
    await upload(kb, "单字", "票 是一个字。");
    expect((await search(kb, q("票"))).results.map((r) => r.title)).toEqual(["单字"]);
    // The text comes back as it was written.
    expect((await search(kb, q("退货"))).results[0]!.text).toBe(
      "说明退货政策。商品可在三十天内退货，请保留发票。",
    );
  });

  test("Japanese (kana and kanji) and Korean too, and CJK text in a knowledge base of another language", async () => {
    const ja = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "返品", language: "ja" })).id;
    await upload(ja, "返品について", "返品は30日以内に受け付けます。「レシート」をお持ちください。");
    await upload(ja, "営業時間", "土曜日は10時から営業します。");
    expect((await search(ja, q("返品"))).results.map((r) => r.title)).toEqual(["返品について"]);
    expect((await search(ja, q("レシートは必要ですか"))).results.map((r) => r.title)).toEqual([
      "返品について",
    ]);
    expect((await search(ja, q("土曜日"))).results.map((r) => r.title)).toEqual(["営業時間"]);

    const ko = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "한국어", language: "ko" })).id;
    await upload(ko, "환불", "환불은 영수증이 있어야 가능합니다.");
    expect((await search(ko, q("영수증"))).results.map((r) => r.title)).toEqual(["환불"]);

    // English configuration: English words stemmed as before, the Chinese ones in pairs.
    await upload(english, "国际", "International orders: 国际订单需要十天。");
    expect((await search(english, q("订单"))).results.map((r) => r.title)).toEqual(["国际"]);
    expect((await search(english, q("order"))).results.map((r) => r.title)).toEqual(["国际"]);
  });

  test("a deleted document is no longer found", async () => {
    const kb = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Temp", language: "en" })).id;
    const doc = await upload(kb, "Temporary", "A unicorn was seen.");
    expect((await search(kb, q("unicorns"))).results).toHaveLength(1);
    const del = await ctx.request(`/api/v1/knowledge-bases/${kb}/documents/${doc}`, {
      method: "DELETE",
      key: seed.liveKey,
    });
    expect(del.status).toBe(200);
    expect((await search(kb, q("unicorns"))).results).toEqual([]);
  });
});

describe("test keys and refusals", () => {
  test("a test key gets results: [] with livemode false", async () => {
    const { status, body } = await search(english, q("Saturday"), seed.testKey);
    expect(status).toBe(200);
    expect(body).toEqual({ livemode: false, results: [] });
  });

  test("an unknown, malformed or foreign knowledge base is 404 in both modes", async () => {
    for (const [kb, key] of [
      ["kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", seed.liveKey],
      ["kb_nope", seed.liveKey],
      [other.kb.id, seed.liveKey],
      [other.kb.id, seed.testKey],
      [seed.agent.id, seed.liveKey],
    ] as const) {
      await expectApiError((await search(kb, q("Saturday"), key)).res, 404, "not_found");
    }
  });

  test.each([
    ["no q", "", "q"],
    ["an empty q", "q=", "q"],
    ["a q of 501 characters", q("a".repeat(501)), "q"],
    ["q twice", "q=a&q=b", "q"],
    ["limit 0", q("a", "&limit=0"), "limit"],
    ["limit 21", q("a", "&limit=21"), "limit"],
    ["an empty limit", q("a", "&limit="), "limit"],
    ["limit as text", q("a", "&limit=ten"), "limit"],
    [
      "a cursor (a ranked query has none)",
      q("a", "&starting_after=doc_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"),
      "starting_after",
    ],
    ["an unknown parameter", q("a", "&lang=fr"), "lang"],
  ])("%s is 400 invalid_query", async (_name, query, param) => {
    await expectApiError((await search(english, query)).res, 400, "invalid_query", { param });
  });

  test("a q of 500 characters is accepted", async () => {
    expect((await search(english, q("a ".repeat(250)))).status).toBe(200);
  });
});

describe("the language of a knowledge base", () => {
  test("admin API: set at creation, changed later; the chunks are indexed again at once", async () => {
    const created = await admin(ctx, "POST", `/organizations/${seed.org.id}/knowledge-bases`, {
      json: { name: "Later English" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "Later English", language: null });
    const kb = created.body.id;
    await upload(kb, "Team", "The team is running late.");
    expect((await search(kb, q("runs"))).results).toEqual([]);

    const patched = await admin(ctx, "PATCH", `/knowledge-bases/${kb}`, { json: { language: "EN-us" } });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...created.body, language: "en-US" });
    expect((await search(kb, q("runs"))).results.map((r) => r.title)).toEqual(["Team"]);

    const cleared = await admin(ctx, "PATCH", `/knowledge-bases/${kb}`, {
      json: { language: null, name: "Plain again" },
    });
    expect(cleared.body).toMatchObject({ language: null, name: "Plain again" });
    expect((await search(kb, q("runs"))).results).toEqual([]);
  });

  test("admin API refusals: a bad tag is 400 with param language, an unknown knowledge base 404", async () => {
    const bad = await admin(ctx, "POST", `/organizations/${seed.org.id}/knowledge-bases`, {
      json: { name: "X", language: "fr_FR" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_request", param: "language" });
    const unknown = await admin(ctx, "PATCH", "/knowledge-bases/kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", {
      json: { language: "fr" },
    });
    expect(unknown.status).toBe(404);
    const malformed = await admin(ctx, "PATCH", "/knowledge-bases/kb_x", { json: { language: "fr" } });
    expect(malformed.status).toBe(404);
  });

  test('CLI: create-knowledge-base --language, update-knowledge-base --language "" clears it', async () => {
    const run = async (...argv: string[]) => {
      const r = await runAdmin(argv, ctx.deps);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
      return JSON.parse(r.stdout);
    };
    const kb = await run(
      "create-knowledge-base",
      "--organization",
      seed.org.id,
      "--name",
      "Shell",
      "--language",
      "fr-ca",
    );
    expect(kb).toMatchObject({ name: "Shell", language: "fr-CA" });
    const cleared = await run("update-knowledge-base", kb.id, "--language", "");
    expect(cleared).toEqual({ ...kb, language: null });
  });

  test("documents added while the language changes are all indexed with the new language", async () => {
    const kb = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Race" })).id;
    const uploads = Array.from({ length: 10 }, (_, i) =>
      upload(kb, `Doc ${i}`, `Runners were running, ${i}.`),
    );
    const change = admin(ctx, "PATCH", `/knowledge-bases/${kb}`, { json: { language: "en" } });
    await Promise.all([...uploads, change]);
    const [row] = await ctx.deps.sql<{ stale: number; total: number }[]>`
      select count(*) filter (where c.search_vector <> to_tsvector('english', search_text(c.content)))::int as stale,
        count(*)::int as total
      from document_chunks c join documents d on d.id = c.document_id where d.knowledge_base_id = ${kb}`;
    expect(row).toEqual({ stale: 0, total: 10 });
    expect((await search(kb, q("run", "&limit=20"))).results).toHaveLength(10);
  });

  // The embedded database runs one transaction at a time: there is no interleaving to check there.
  test.skipIf(TEST_DATABASE !== "postgres")(
    "a language change waits for a document being added, then indexes it too",
    async () => {
      const kb = (await createKnowledgeBase(ctx.deps, seed.org.id, { name: "Held" })).id;
      const conn = await ctx.deps.sql.reserve();
      let changed = false;
      try {
        await conn`begin`;
        await insertDocument(conn, {
          id: ctx.deps.ids.next("doc"),
          organizationId: seed.org.id,
          knowledgeBaseId: kb,
          title: "Held",
          chunks: chunkText("Runners were running."),
          createdAt: new Date(),
        });
        const change = updateKnowledgeBase(ctx.deps, kb, { language: "en" }).then(() => {
          changed = true;
        });
        await Bun.sleep(300);
        expect(changed).toBe(false);
        await conn`commit`;
        await change;
      } finally {
        conn.release();
      }
      expect(changed).toBe(true);
      expect((await search(kb, q("run"))).results.map((r) => r.title)).toEqual(["Held"]);
    },
  );
});
