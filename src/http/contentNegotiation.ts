/** Content codings and validators for the files this server serves itself (widget, docs assets). */

export type Encoding = "br" | "gzip" | "identity";

/**
 * The best coding the client accepts among those available: brotli, then gzip, else the plain
 * file; `q=0` refuses a coding and `*` stands for any coding not named.
 */
export function chooseEncoding(
  header: string | undefined,
  available: readonly Encoding[] = ["br", "gzip", "identity"],
): Encoding {
  const accepted = new Map<string, number>();
  for (const part of (header ?? "").split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    if (!name) continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    const weight = q ? Number(q.slice(2)) : 1;
    accepted.set(name, Number.isFinite(weight) ? weight : 0);
  }
  const weight = (name: Encoding) =>
    available.includes(name) ? (accepted.get(name) ?? (accepted.get("*") || 0)) : 0;
  if (weight("br") > 0 && weight("br") >= weight("gzip")) return "br";
  if (weight("gzip") > 0) return "gzip";
  return "identity";
}

/**
 * `If-None-Match` with the weak comparison (RFC 9110 §13.1.2). Every coding of a file is the same
 * content, so a validator of any of them is current.
 */
export function matchesEtag(header: string | undefined, etags: readonly string[]): boolean {
  if (!header) return false;
  if (header.trim() === "*") return true;
  return header.split(",").some((tag) => etags.includes(tag.trim().replace(/^W\//, "")));
}
