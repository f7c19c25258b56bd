import { WebhookVerificationError } from "./errors.ts";
import type { WebhookEvent } from "./types.ts";

/** How far a delivery's `webhook-timestamp` may be from now (Standard Webhooks' recommendation). */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * Proves that a delivery comes from the service (Standard Webhooks) and returns its event:
 * `webhook-signature` must hold, among its space-separated `v1,<base64>` entries (two during the
 * 24 hours after a secret rotation), the HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`
 * under the secret's key (the base64 after `whsec_`), and `webhook-timestamp` must be within
 * 5 minutes of now (an old delivery replayed is refused). Throws WebhookVerificationError otherwise.
 *
 * `body` is the raw body as received: a body parsed and serialized again may differ by a byte.
 * Deliveries are at least once (ignore a `webhook-id` already handled) and unordered: the events of
 * one object order by `data.updatedAt` (`data.createdAt` for `knowledge.document_ready`).
 */
export async function verifyWebhook(
  secret: string,
  headers: WebhookHeaders,
  body: string | Uint8Array,
  opts: { toleranceSeconds?: number; now?: Date } = {},
): Promise<WebhookEvent> {
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature header");
  }
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError("webhook-timestamp is not Unix seconds");
  const now = Math.floor((opts.now ?? new Date()).getTime() / 1000);
  const tolerance = opts.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  if (Math.abs(now - Number(timestamp)) > tolerance) {
    throw new WebhookVerificationError("webhook-timestamp is too far from now");
  }

  const bodyBytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`);
  const signed = new Uint8Array(prefix.length + bodyBytes.length);
  signed.set(prefix);
  signed.set(bodyBytes, prefix.length);

  const key = await crypto.subtle.importKey(
    "raw",
    secretKey(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["verify"],
  );
  let verified = false;
  for (const entry of signatures.split(" ")) {
    const [version, value] = entry.split(",", 2);
    if (version !== "v1" || !value) continue;
    const candidate = base64Bytes(value);
    // crypto.subtle.verify compares in constant time: timing tells nothing about the expected value.
    if (candidate && (await crypto.subtle.verify("HMAC", key, candidate, signed))) verified = true;
  }
  if (!verified) throw new WebhookVerificationError("no webhook-signature matches the body and the secret");

  const text = typeof body === "string" ? body : new TextDecoder().decode(body);
  try {
    return JSON.parse(text) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError("the body is not JSON");
  }
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (headers instanceof Headers) return headers.get(name) ?? undefined;
  const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
  return Array.isArray(entry) ? entry.join(" ") : entry;
}

function secretKey(secret: string): Uint8Array<ArrayBuffer> {
  const bytes = secret.startsWith("whsec_") ? base64Bytes(secret.slice("whsec_".length)) : null;
  if (!bytes || bytes.length === 0) throw new TypeError("verifyWebhook: the secret is not a whsec_… secret");
  return bytes;
}

function base64Bytes(text: string): Uint8Array<ArrayBuffer> | null {
  try {
    const binary = atob(text);
    const out = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
    return out;
  } catch {
    return null;
  }
}
