import type { Db } from "./engine/connection.ts";

/** Statements of the bot-check tokens already accepted (captcha_tokens_used), kept as SHA-256 hashes. */

/**
 * Records an accepted token. True when it was not accepted since `rememberedSince` (by any process):
 * a row older than that is taken over, so the answer does not depend on when housekeeping ran.
 */
export async function rememberCaptchaToken(
  sql: Db,
  hash: Uint8Array,
  at: Date,
  rememberedSince: Date,
): Promise<boolean> {
  const rows = await sql`
    insert into captcha_tokens_used (token_hash, accepted_at) values (${hash}, ${at})
    on conflict (token_hash) do update set accepted_at = excluded.accepted_at
      where captcha_tokens_used.accepted_at <= ${rememberedSince}
    returning 1`;
  return rows.length === 1;
}

/** Forgets tokens accepted at or before `before`. */
export async function deleteCaptchaTokensBefore(sql: Db, before: Date): Promise<number> {
  const deleted = await sql`delete from captcha_tokens_used where accepted_at <= ${before}`;
  return deleted.count;
}
