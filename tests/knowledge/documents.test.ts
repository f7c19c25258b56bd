import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CHUNK_MAX_CHARS, type Chunk, chunkText } from "../../src/services/documents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/** POST /api/v1/knowledge-bases/{id}/documents: both modes, every refusal, and the chunking. */

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
let other: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext();
  seed = await seedOrganization(ctx, { paidPlan: false });
  other = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

const upload = (key: string, json: unknown, kb = seed.kb.id) =>
  ctx.request(`/api/v1/knowledge-bases/${kb}/documents`, { method: "POST", key, json });

const counts = async () => {
  const [row] = await ctx.db.sql<{ documents: number; chunks: number }[]>`
    select (select count(*)::int from documents) as documents, (select count(*)::int from document_chunks) as chunks`;
  return row!;
};

async function readyEvents(key: string) {
  const res = await ctx.request("/api/v1/events?type=knowledge.document_ready&limit=100", { key });
  expect(res.status).toBe(200);
  return (await res.json()).data as { id: string; livemode: boolean; data: Record<string, unknown> }[];
}

const TEXT = [
  "We are open Monday to Friday, 9:00 to 18:00.",
  "On Saturdays we open from 10:00 to 13:00. We are closed on Sundays and public holidays.",
  "Parking is free for customers, behind the shop.",
].join("\n\n");

describe("with a test key", () => {
  test("201 with a fictitious document, nothing stored, knowledge.document_ready with livemode false", async () => {
    const before = await counts();
    const res = await upload(seed.testKey, { title: "Opening hours", text: TEXT });
    expect(res.status).toBe(201);
    const body = await res.json();
    expect(body).toEqual({
      documentId: expect.stringMatching(/^doc_[0-9A-Z]{26}$/),
      chunkCount: 1,
      livemode: false,
      simulated: true,
    });
    expect(await counts()).toEqual(before);
    const [event] = (await readyEvents(seed.testKey)).filter((e) => e.data.documentId === body.documentId);
    expect(event).toMatchObject({
      livemode: false,
      data: { documentId: body.documentId, knowledgeBaseId: seed.kb.id, chunkCount: 1, livemode: false },
    });
    // The live side of the organization does not see it.
    expect((await readyEvents(seed.liveKey)).some((e) => e.data.documentId === body.documentId)).toBe(false);
  });

  test("the chunk count is the one a live upload of the same text gets", async () => {
    const text = Array.from(
      { length: 30 },
      (_, i) => `Paragraph ${i}. ${"Some words here. ".repeat(10)}`,
    ).join("\n\n");
    const test = await (await upload(seed.testKey, { title: "Long", text })).json();
    const live = await (await upload(seed.liveKey, { title: "Long", text })).json();
    expect(test.chunkCount).toBe(live.chunkCount);
    expect(test.chunkCount).toBe(chunkText(text).length);
    expect(test.chunkCount).toBeGreaterThan(3);
  });
});

describe("with a live key", () => {
  test("201, the document and its chunks are stored, and the event carries livemode true; no plan needed", async () => {
    const res = await upload(seed.liveKey, { title: "  Opening hours  ", text: TEXT });
    expect(res.status).toBe(201);
    const body = await res.json();
    expect(body).toEqual({ documentId: expect.stringMatching(/^doc_/), chunkCount: 1, livemode: true });
    const [doc] = await ctx.db.sql`
      select organization_id, knowledge_base_id, title, chunk_count from documents where id = ${body.documentId}`;
    expect({ ...doc }).toEqual({
      organization_id: seed.org.id,
      knowledge_base_id: seed.kb.id,
      title: "Opening hours",
      chunk_count: 1,
    });
    const chunks = await ctx.db.sql<{ position: number; content: string }[]>`
      select position, content from document_chunks where document_id = ${body.documentId} order by position`;
    expect(chunks.map((c) => ({ ...c }))).toEqual([{ position: 0, content: TEXT }]);
    const [event] = (await readyEvents(seed.liveKey)).filter((e) => e.data.documentId === body.documentId);
    expect(event).toMatchObject({
      livemode: true,
      data: { documentId: body.documentId, knowledgeBaseId: seed.kb.id, chunkCount: 1, livemode: true },
    });
  });

  test("a text close to 1 MiB is accepted and stored whole, in chunks of at most 1,000 characters", async () => {
    const sentence = "The agent reads this sentence when a caller asks about it. ";
    const text = sentence.repeat(Math.floor((1024 * 1024 - 200) / sentence.length));
    const res = await upload(seed.liveKey, { title: "Big", text });
    expect(res.status).toBe(201);
    const { documentId, chunkCount } = await res.json();
    const chunks = await ctx.db.sql<{ content: string }[]>`
      select content from document_chunks where document_id = ${documentId} order by position`;
    expect(chunks.length).toBe(chunkCount);
    expect(Math.max(...chunks.map((c) => c.content.length))).toBeLessThanOrEqual(CHUNK_MAX_CHARS);
    expect(chunks.map((c) => c.content).join(" ")).toBe(text.trim());
  });
});

describe("refusals", () => {
  test("an unknown, malformed or other organization's knowledge base is 404 not_found in both modes, nothing written", async () => {
    const before = await counts();
    for (const key of [seed.liveKey, seed.testKey]) {
      for (const kb of [other.kb.id, "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", "nope", seed.agent.id]) {
        const res = await upload(key, { title: "T", text: "x" }, kb);
        await expectApiError(res, 404, "not_found");
      }
    }
    expect(await counts()).toEqual(before);
  });

  test("title and text are required non-empty strings; unknown fields refused: 400 invalid_request with param", async () => {
    const cases: [unknown, string][] = [
      [{ text: "x" }, "title"],
      [{ title: "", text: "x" }, "title"],
      [{ title: "   ", text: "x" }, "title"],
      [{ title: "t".repeat(201), text: "x" }, "title"],
      [{ title: 3, text: "x" }, "title"],
      [{ title: "T" }, "text"],
      [{ title: "T", text: "  \n\n " }, "text"],
      [{ title: "T", text: ["x"] }, "text"],
      [{ title: "T", text: "x", url: "https://example.com" }, "url"],
    ];
    const before = await counts();
    for (const key of [seed.liveKey, seed.testKey]) {
      for (const [json, param] of cases) {
        await expectApiError(await upload(key, json), 400, "invalid_request", { param });
      }
    }
    expect(await counts()).toEqual(before);
  });

  test("a NUL character in the title or the text is 400 with its param in both modes, nothing written", async () => {
    const before = await counts();
    for (const key of [seed.liveKey, seed.testKey]) {
      for (const [json, param] of [
        [{ title: "T\u0000", text: "x" }, "title"],
        [{ title: "T", text: "a\u0000b" }, "text"],
      ] as const) {
        await expectApiError(await upload(key, json), 400, "invalid_request", { param });
      }
    }
    // An escaped backslash followed by "u0000" is ordinary text.
    expect((await upload(seed.testKey, { title: "T", text: "C:\\u0000 is a path" })).status).toBe(201);
    expect(await counts()).toEqual(before);
  });

  test("a body over 1 MiB is 413 payload_too_large; not JSON is 415", async () => {
    const res = await upload(seed.liveKey, { title: "T", text: "x".repeat(1024 * 1024) });
    await expectApiError(res, 413, "payload_too_large");
    const raw = await ctx.request(`/api/v1/knowledge-bases/${seed.kb.id}/documents`, {
      method: "POST",
      key: seed.liveKey,
      body: "title=T",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(raw.status).toBe(415);
  });

  test("a key without knowledge:write is 403 missing_scope; no key is 401", async () => {
    const limited = await createSecretKey(ctx.deps, seed.org.id, {
      mode: "live",
      scopes: ["contacts:write"],
    });
    const res = await upload(limited.key, { title: "T", text: "x" });
    await expectApiError(res, 403, "missing_scope");
    const anonymous = await ctx.request(`/api/v1/knowledge-bases/${seed.kb.id}/documents`, {
      method: "POST",
      json: { title: "T", text: "x" },
    });
    expect(anonymous.status).toBe(401);
  });
});

const texts = (chunks: Chunk[]) => chunks.map((c) => c.text);

describe("chunkText", () => {
  test("keeps paragraphs together while they fit, then sentences, then words; nothing lost", () => {
    expect(texts(chunkText("  one\n\ntwo  \n \n three ", 100))).toEqual(["one\n\ntwo\n\nthree"]);
    expect(texts(chunkText("aaaa bbbb\n\ncccc dddd", 10))).toEqual(["aaaa bbbb", "cccc dddd"]);
    expect(texts(chunkText("First one. Second one! Third?", 12))).toEqual([
      "First one.",
      "Second one!",
      "Third?",
    ]);
    expect(texts(chunkText("alpha beta gamma delta", 11))).toEqual(["alpha beta", "gamma delta"]);
    expect(texts(chunkText("x".repeat(25), 10))).toEqual(["x".repeat(10), "x".repeat(10), "x".repeat(5)]);
    expect(chunkText(" \n\n ")).toEqual([]);
  });

  test("each chunk says what joined it to the one before: a blank line, a space, or nothing inside a word", () => {
    expect(chunkText("aaaa bbbb\n\ncccc dddd", 10).map((c) => c.separator)).toEqual(["", "\n\n"]);
    expect(chunkText("First one. Second one! Third?", 12).map((c) => c.separator)).toEqual(["", " ", " "]);
    expect(chunkText("x".repeat(25), 10).map((c) => c.separator)).toEqual(["", "", ""]);
    const cut = chunkText(`intro\n\n${"y".repeat(15)} end`, 10);
    expect(cut).toEqual([
      { text: "intro", separator: "" },
      { text: "y".repeat(10), separator: "\n\n" },
      { text: "yyyyy end", separator: "" },
    ]);
  });

  test("a long word of characters outside the BMP is cut between characters, never inside one", () => {
    const word = `a${"😀".repeat(600)}`;
    const chunks = texts(chunkText(word, 1000));
    expect(chunks.length).toBe(2);
    // encodeURIComponent throws on a lone surrogate, i.e. half a character.
    const wellFormed = (t: string) => {
      try {
        encodeURIComponent(t);
        return true;
      } catch {
        return false;
      }
    };
    expect(chunks.every((c) => c.length <= 1000 && wellFormed(c))).toBe(true);
    expect(chunks.join("")).toBe(word);
  });

  test("every chunk is within the limit, and the chunks joined by their separators give the text back", () => {
    const words = Array.from(
      { length: 5000 },
      (_, i) =>
        `w${i}${i % 17 === 0 ? "." : ""}${i % 101 === 0 ? "\n\n" : ""}${i % 211 === 0 ? "z".repeat(700) : ""}`,
    );
    const text = words.join(" ");
    const chunks = chunkText(text, 300);
    expect(chunks.every((c) => c.text.length > 0 && c.text.length <= 300)).toBe(true);
    const normalized = text
      .split(/\n\s*\n/)
      .map((p) => p.replace(/\s+/g, " ").trim())
      .filter(Boolean)
      .join("\n\n");
    expect(chunks.map((c) => c.separator + c.text).join("")).toBe(normalized);
  });

  test("Chinese and Japanese text is cut after 。！？ (no space follows them), never inside a sentence", () => {
    const sentences = Array.from(
      { length: 200 },
      (_, i) => `第${i}句话讲营业时间和预约方法${"。！？"[i % 3]}`,
    );
    const text = sentences.join("");
    expect(text.length).toBeGreaterThan(3000);
    const chunks = chunkText(text);
    expect(chunks.length).toBeGreaterThan(2);
    for (const c of chunks) {
      expect(c.text.length).toBeLessThanOrEqual(CHUNK_MAX_CHARS);
      expect(c.text).toMatch(/[。！？]$/);
    }
    // Nothing between the sentences: the chunks joined give the text back exactly.
    expect(chunks.map((c) => c.separator + c.text).join("")).toBe(text);
    expect(chunks.slice(1).every((c) => c.separator === "")).toBe(true);
    // Mixed with Latin text, and a space after 。 is kept.
    expect(chunkText("日本語の文です。 English after. 終わり。", 10)).toEqual([
      { text: "日本語の文です。", separator: "" },
      { text: "English", separator: " " },
      { text: "after.", separator: " " },
      { text: "終わり。", separator: " " },
    ]);
  });

  test("a sentence ends after the closing quotes and brackets that follow its mark: no chunk starts with one", () => {
    const closers = ["」", "』", "）", "】", "”", "’", '"', "'", "»", ")", "]"];
    for (const closer of closers) {
      const text = `第一句话很长很长很长。${closer}第二句话也很长很长！${closer}${closer}第三句？${closer}`;
      const chunks = chunkText(text, 14);
      expect(chunks.map((c) => c.text)).toEqual([
        `第一句话很长很长很长。${closer}`,
        `第二句话也很长很长！${closer}${closer}`,
        `第三句？${closer}`,
      ]);
      expect(chunks.map((c) => c.separator + c.text).join("")).toBe(text);
    }
    expect(texts(chunkText("彼は「はい。」と言った。「本当ですか？」", 8))).toEqual([
      "彼は「はい。」",
      "と言った。",
      "「本当ですか？」",
    ]);
    // Latin text too: the space after the closer is where the sentence ends.
    expect(chunkText('He said "Stop." Then (at last!) he left.', 16)).toEqual([
      { text: 'He said "Stop."', separator: "" },
      { text: "Then (at last!)", separator: " " },
      { text: "he left.", separator: " " },
    ]);
  });

  test("a CJK sentence longer than a chunk is still cut by length", () => {
    const sentence = `${"长".repeat(2500)}。`;
    const chunks = chunkText(`${sentence}短句。`);
    expect(chunks.map((c) => c.text.length)).toEqual([1000, 1000, 504]);
    expect(chunks.map((c) => c.separator + c.text).join("")).toBe(`${sentence}短句。`);
  });
});
