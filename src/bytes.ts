import { Buffer } from "node:buffer";

/** Bytes as lowercase hexadecimal. */
export function toHex(bytes: Uint8Array): string {
  // Native; a character loop was 5 % of the server's profile once hashes went into batched statements.
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}

/**
 * The chunks one after the other in a new array of its own (never a view into a shared pool, unlike
 * `Buffer.concat`, so its buffer may be transferred to another thread).
 */
export function concatBytes(chunks: readonly Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
