import type { SecretKeyAuth } from "../auth/access.ts";
import {
  type DocumentRow,
  deleteDocument as deleteDocumentRow,
  documentsPage,
  findDocument,
  insertDocument,
} from "../db/documents.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import { type Page, paginate } from "../db/engine/pages.ts";
import { knowledgeBaseExists } from "../db/knowledgeBases.ts";
import type { Deps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { isId } from "../ids.ts";
import { recordEvent } from "./events.ts";
import { afterBulkChange } from "./housekeeping.ts";

/**
 * Knowledge-base documents. A live key's document
 * is split into chunks and stored; a test key's upload is validated and answered with a fictitious
 * document id, writes no document, and emits `knowledge.document_ready` with `livemode` false. Both
 * count the chunks the same way, so a test answer looks like the live one would. No plan is needed.
 * Documents are live objects: listed, read (their text put back together from the chunks) and deleted
 * with live keys; a test key lists none and reads or deletes none.
 */

/** A document to add, once validated. */
export interface DocumentInput {
  title: string;
  text: string;
}

export interface DocumentReady {
  documentId: string;
  chunkCount: number;
  livemode: boolean;
  /** Present (true) only for a test key's upload: nothing was stored. */
  simulated?: true;
}

/** Longest chunk, in characters: a few sentences, what a retrieval step hands an agent at once. */
export const CHUNK_MAX_CHARS = 1000;

export async function addDocument(
  deps: Deps,
  auth: SecretKeyAuth,
  knowledgeBaseId: string,
  input: DocumentInput,
): Promise<DocumentReady> {
  const { sql, clock } = deps;
  if (!isId(knowledgeBaseId, "kb")) throw notFound("knowledge base");
  const chunks = chunkText(input.text);
  const documentId = deps.ids.next("doc");
  const createdAt = clock.now();
  // The event's data: `createdAt`, the document's (a document never changes), orders its events.
  const ready = {
    documentId,
    knowledgeBaseId,
    chunkCount: chunks.length,
    livemode: auth.livemode,
    createdAt: createdAt.toISOString(),
  };
  const event = {
    organizationId: auth.organizationId,
    agentId: null,
    type: "knowledge.document_ready" as const,
    livemode: auth.livemode,
    data: ready,
  };

  if (!auth.livemode) {
    if (!(await knowledgeBaseExists(sql, auth.organizationId, knowledgeBaseId)))
      throw notFound("knowledge base");
    await recordEvent(sql, deps, event);
    return { documentId, chunkCount: chunks.length, livemode: false, simulated: true };
  }

  await pipelinedTransaction(sql, async (tx) => {
    const inserted = await insertDocument(tx, {
      id: documentId,
      organizationId: auth.organizationId,
      knowledgeBaseId,
      title: input.title,
      chunks,
      createdAt,
    });
    if (!inserted) throw notFound("knowledge base");
    await afterBulkChange(tx, chunks.length);
    await recordEvent(tx, deps, event);
  });
  return { documentId, chunkCount: chunks.length, livemode: true };
}

export function documentView(r: DocumentRow) {
  return {
    id: r.id,
    knowledgeBaseId: r.knowledge_base_id,
    title: r.title,
    chunkCount: r.chunk_count,
    createdAt: r.created_at.toISOString(),
  };
}
export type DocumentView = ReturnType<typeof documentView>;

type KnowledgeScope = Pick<SecretKeyAuth, "organizationId" | "livemode">;

/** The documents of a knowledge base, newest first, cursor list; none for a test key. */
export async function listDocuments(
  deps: Pick<Deps, "sql">,
  auth: KnowledgeScope,
  knowledgeBaseId: string,
  q: { limit: number; starting_after?: string | undefined },
): Promise<Page<DocumentView>> {
  const { sql } = deps;
  if (
    !isId(knowledgeBaseId, "kb") ||
    !(await knowledgeBaseExists(sql, auth.organizationId, knowledgeBaseId))
  ) {
    throw notFound("knowledge base");
  }
  const scope = { knowledgeBaseId, livemode: auth.livemode };
  return paginate<DocumentRow, DocumentView>({ ...documentsPage(sql, scope, q), map: documentView });
}

/** One document with its text. A test key, an unknown document or another knowledge base's: 404. */
export async function getDocument(
  deps: Pick<Deps, "sql">,
  auth: KnowledgeScope,
  knowledgeBaseId: string,
  documentId: string,
): Promise<DocumentView & { text: string }> {
  const row =
    auth.livemode && isId(knowledgeBaseId, "kb") && isId(documentId, "doc")
      ? await findDocument(deps.sql, auth.organizationId, knowledgeBaseId, documentId)
      : null;
  if (!row) throw notFound("document");
  return { ...documentView(row), text: row.text };
}

/** Deletes a document and its chunks: it is no longer listed, read or found by searches. */
export async function deleteDocument(
  deps: Pick<Deps, "sql">,
  auth: KnowledgeScope,
  knowledgeBaseId: string,
  documentId: string,
): Promise<{ id: string; deleted: true }> {
  const deleted =
    auth.livemode &&
    isId(knowledgeBaseId, "kb") &&
    isId(documentId, "doc") &&
    (await deleteDocumentRow(deps.sql, auth.organizationId, knowledgeBaseId, documentId));
  if (!deleted) throw notFound("document");
  return { id: documentId, deleted: true };
}

/**
 * A piece of a document: its text, and what joins it to the chunk before it (a blank line between
 * paragraphs, a space between sentences or words, nothing inside a word cut in pieces; "" for the
 * first chunk), so that the document's text can be put back together from its chunks.
 */
export interface Chunk {
  text: string;
  separator: string;
}

/**
 * Splits text into chunks of at most `max` characters along its structure: paragraphs are kept
 * together while they fit, a longer paragraph is cut between sentences (Chinese and Japanese ones
 * too, after 。！？), a longer sentence between words, and a longer word is cut where it must. Whitespace runs inside a chunk become one space,
 * paragraph breaks inside a chunk stay a blank line. Text with content gives at least one chunk.
 */
export function chunkText(text: string, max = CHUNK_MAX_CHARS): Chunk[] {
  const chunks: Chunk[] = [];
  let current: Chunk | null = null;
  const add = (piece: string, separator: string) => {
    if (current && current.text.length + separator.length + piece.length <= max) {
      current.text += separator + piece;
      return;
    }
    if (current) chunks.push(current);
    current = { text: piece, separator: current || chunks.length ? separator : "" };
  };
  const flush = () => {
    if (current) chunks.push(current);
    current = null;
  };
  for (const paragraph of paragraphsOf(text)) {
    if (paragraph.length <= max) {
      add(paragraph, PARAGRAPH_BREAK);
      continue;
    }
    flush();
    for (const [i, piece] of splitToFit(paragraph, max).entries()) {
      add(piece.text, i === 0 ? PARAGRAPH_BREAK : piece.separator);
    }
    flush();
  }
  flush();
  return chunks;
}

const PARAGRAPH_BREAK = "\n\n";

function paragraphsOf(text: string): string[] {
  return text
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, " ").trim())
    .filter((p) => p.length > 0);
}

/** Pieces of at most `max` characters, each with what joins it to the one before: sentences, else words, else slices of a word. */
function splitToFit(paragraph: string, max: number): Chunk[] {
  const pieces: Chunk[] = [];
  for (const sentence of sentencesOf(paragraph)) {
    if (sentence.text.length <= max) {
      pieces.push(sentence);
      continue;
    }
    for (const [i, word] of sentence.text.split(" ").entries()) {
      const separator = i === 0 ? sentence.separator : " ";
      if (word.length <= max) {
        pieces.push({ text: word, separator });
        continue;
      }
      for (const [j, slice] of cutWord(word, max).entries()) {
        pieces.push({ text: slice, separator: j === 0 ? separator : "" });
      }
    }
  }
  return pieces;
}

/** Closing quotes and brackets: a sentence that ends inside them ends after them. */
const CLOSERS = "\"'’”»›)\\]）】〕〗〙〛〉》」』｣";

/**
 * Where a sentence ends: after `.`, `!`, `?` or `…` followed by a space, or after the ideographic
 * full stop, exclamation and question marks (。！？), which Chinese and Japanese write with no space
 * after them; in both cases after the closing quotes and brackets that follow the mark
 * (`「はい。」` is one sentence), so no sentence starts with one. The match is what separates the two
 * sentences ("" or " ").
 */
const SENTENCE_END = new RegExp(
  `(?<=[.!?…][${CLOSERS}]*)\\s+|(?<=[。！？][${CLOSERS}]*)(?![${CLOSERS}])\\s*`,
  "g",
);

/** The sentences of a paragraph (single spaces only), each with what came before it. */
function sentencesOf(paragraph: string): Chunk[] {
  const sentences: Chunk[] = [];
  let start = 0;
  let separator = "";
  for (const end of paragraph.matchAll(SENTENCE_END)) {
    if (end.index === start) continue;
    sentences.push({ text: paragraph.slice(start, end.index), separator });
    start = end.index + end[0].length;
    separator = end[0];
  }
  if (start < paragraph.length) sentences.push({ text: paragraph.slice(start), separator });
  return sentences;
}

/** A word longer than `max` UTF-16 units, in pieces that never split a character's surrogate pair. */
function cutWord(word: string, max: number): string[] {
  const pieces: string[] = [];
  let piece = "";
  for (const char of word) {
    if (piece.length + char.length > max) {
      pieces.push(piece);
      piece = "";
    }
    piece += char;
  }
  if (piece) pieces.push(piece);
  return pieces;
}
