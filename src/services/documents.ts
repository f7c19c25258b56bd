import type { SecretKeyAuth } from "../auth/access.ts";
import { insertDocument } from "../db/documents.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import { knowledgeBaseExists } from "../db/knowledgeBases.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId } from "../ids.ts";
import { recordEvent } from "./events.ts";

/**
 * Knowledge-base documents. A live key's document
 * is split into chunks and stored; a test key's upload is validated and answered with a fictitious
 * document id, writes no document, and emits `knowledge.document_ready` with `livemode` false. Both
 * count the chunks the same way, so a test answer looks like the live one would. No plan is needed.
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
  if (!isId(knowledgeBaseId, "kb")) throw noSuchKnowledgeBase();
  const chunks = chunkText(input.text);
  const documentId = deps.ids.next("doc");
  const ready = { documentId, knowledgeBaseId, chunkCount: chunks.length, livemode: auth.livemode };
  const event = {
    organizationId: auth.organizationId,
    agentId: null,
    type: "knowledge.document_ready" as const,
    livemode: auth.livemode,
    data: ready,
  };

  if (!auth.livemode) {
    if (!(await knowledgeBaseExists(sql, auth.organizationId, knowledgeBaseId))) throw noSuchKnowledgeBase();
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
      createdAt: clock.now(),
    });
    if (!inserted) throw noSuchKnowledgeBase();
    await recordEvent(tx, deps, event);
  });
  return { documentId, chunkCount: chunks.length, livemode: true };
}

function noSuchKnowledgeBase() {
  return new ApiError("not_found", "No such knowledge base.", { param: "id" });
}

/**
 * Splits text into chunks of at most `max` characters along its structure: paragraphs are kept
 * together while they fit, a longer paragraph is cut between sentences, a longer sentence between
 * words, and a longer word is cut where it must. Whitespace runs inside a chunk become one space,
 * paragraph breaks inside a chunk stay a blank line. Text with content gives at least one chunk.
 */
export function chunkText(text: string, max = CHUNK_MAX_CHARS): string[] {
  const chunks: string[] = [];
  let current = "";
  const flush = () => {
    if (current) chunks.push(current);
    current = "";
  };
  const add = (piece: string, separator: string) => {
    if (!current) current = piece;
    else if (current.length + separator.length + piece.length <= max) current += separator + piece;
    else {
      flush();
      current = piece;
    }
  };
  for (const paragraph of paragraphsOf(text)) {
    if (paragraph.length <= max) {
      add(paragraph, "\n\n");
      continue;
    }
    flush();
    for (const sentence of splitToFit(paragraph, max)) add(sentence, " ");
    flush();
  }
  flush();
  return chunks;
}

function paragraphsOf(text: string): string[] {
  return text
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, " ").trim())
    .filter((p) => p.length > 0);
}

/** Pieces of at most `max` characters: sentences, else words, else slices of a word. */
function splitToFit(paragraph: string, max: number): string[] {
  const pieces: string[] = [];
  for (const sentence of paragraph.split(/(?<=[.!?…])\s+/)) {
    if (sentence.length <= max) {
      pieces.push(sentence);
      continue;
    }
    for (const word of sentence.split(" ")) {
      if (word.length <= max) pieces.push(word);
      else pieces.push(...cutWord(word, max));
    }
  }
  return pieces;
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
