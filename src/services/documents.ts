import { z } from "@hono/zod-openapi";
import type { SecretKeyAuth } from "../auth/secretKey.ts";
import { pipelinedTransaction } from "../db/engine/connection.ts";
import type { Deps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { isId, newId } from "../ids.ts";
import { recordEvent } from "./events.ts";

/**
 * Knowledge-base documents (SPEC.md "Knowledge base documents", CONTRACT.md §6). A live key's document
 * is split into chunks and stored; a test key's upload is validated and answered with a fictitious
 * document id, writes no document, and emits `knowledge.document_ready` with `livemode` false. Both
 * count the chunks the same way, so a test answer looks like the live one would. No plan is needed.
 */

export const DocumentInputSchema = z
  .object({
    title: z
      .string()
      .trim()
      .min(1, { message: "must not be empty" })
      .max(200, { message: "must be at most 200 characters" })
      .openapi({ example: "Opening hours" }),
    text: z
      .string()
      .refine((t) => t.trim().length > 0, { message: "must not be empty" })
      .openapi({
        description: "The document's plain text (the whole request at most 1 MiB).",
        example: "We are open Monday to Friday, 9:00 to 18:00.\n\nOn Saturdays, 10:00 to 13:00.",
      }),
  })
  .strict()
  .openapi("DocumentInput");

export type DocumentInput = z.output<typeof DocumentInputSchema>;

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
  deps: Pick<Deps, "sql" | "clock">,
  auth: SecretKeyAuth,
  knowledgeBaseId: string,
  input: DocumentInput,
): Promise<DocumentReady> {
  const { sql, clock } = deps;
  if (!isId(knowledgeBaseId, "kb")) throw noSuchKnowledgeBase();
  const chunks = chunkText(input.text);
  const documentId = newId("doc", clock);
  const ready = { documentId, knowledgeBaseId, chunkCount: chunks.length, livemode: auth.livemode };
  const event = {
    organizationId: auth.organizationId,
    type: "knowledge.document_ready" as const,
    livemode: auth.livemode,
    data: ready,
  };

  if (!auth.livemode) {
    const [kb] = await sql`
      select 1 from knowledge_bases where id = ${knowledgeBaseId} and organization_id = ${auth.organizationId}`;
    if (!kb) throw noSuchKnowledgeBase();
    await recordEvent(sql, clock, event);
    return { documentId, chunkCount: chunks.length, livemode: false, simulated: true };
  }

  await pipelinedTransaction(sql, async (tx) => {
    // The knowledge base must be the organization's: the insert selects it, and inserts nothing otherwise.
    const inserted = await tx`
      insert into documents (id, organization_id, knowledge_base_id, title, chunk_count, created_at)
      select ${documentId}, organization_id, id, ${input.title}, ${chunks.length}, ${clock.now()}
      from knowledge_bases where id = ${knowledgeBaseId} and organization_id = ${auth.organizationId}
      returning id`;
    if (inserted.length === 0) throw noSuchKnowledgeBase();
    await tx`
      insert into document_chunks (document_id, position, content)
      select ${documentId}, ordinality - 1, content
      from unnest(${chunks}::text[]) with ordinality as c(content, ordinality)`;
    await recordEvent(tx, clock, event);
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
