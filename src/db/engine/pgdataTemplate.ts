import { Buffer } from "node:buffer";
import {
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { gunzipSync, gzipSync } from "node:zlib";
import { PGlite } from "@electric-sql/pglite";
import type { Logger } from "../../log.ts";
import { type PgliteFiles, TEMPLATE_ASSET } from "../../runtime/runtime.ts";

/**
 * A pre-initialised PostgreSQL data directory. initdb under WebAssembly takes seconds; copying
 * the result of one initdb takes tens of milliseconds, so every new embedded database starts
 * from this template. The build embeds it in the executable; from the sources it is made once
 * and cached under node_modules/.cache/voice-service/.
 *
 * Our own small archive rather than PGlite's dumpDataDir(): a dump is taken from a running
 * database (pg_control says "in production"), so each new database would begin with crash
 * recovery; this one is packed from a cleanly shut down folder. It also stores the zero tail of
 * files (most of the 16 MiB WAL segment) as a length, and unpacking recreates it as a sparse file.
 */

const MAGIC = "VSPGDATA1\n";

/** [relative path, size, stored bytes] for a file; [relative path, -1, 0] for a folder. */
type Entry = [path: string, size: number, stored: number];

export interface Template {
  entries: Entry[];
  payload: Uint8Array;
  /** Byte offset of each entry's stored bytes in payload. */
  offsets: number[];
}

export function packDataDir(dir: string): Uint8Array {
  const entries: Entry[] = [];
  const chunks: Uint8Array[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      if (statSync(join(dir, path)).isDirectory()) {
        entries.push([path, -1, 0]);
        walk(path);
        continue;
      }
      const bytes = readFileSync(join(dir, path));
      let end = bytes.length;
      while (end > 0 && bytes[end - 1] === 0) end--;
      entries.push([path, bytes.length, end]);
      chunks.push(bytes.subarray(0, end));
    }
  };
  walk("");
  const header = new TextEncoder().encode(JSON.stringify(entries));
  const length = new Uint8Array(4);
  new DataView(length.buffer).setUint32(0, header.length, true);
  return gzipSync(Buffer.concat([new TextEncoder().encode(MAGIC), length, header, ...chunks]));
}

export function parseTemplate(archive: Uint8Array): Template {
  const raw = gunzipSync(archive);
  if (new TextDecoder().decode(raw.subarray(0, MAGIC.length)) !== MAGIC) {
    throw new Error("not a data directory template");
  }
  const headerLength = new DataView(raw.buffer, raw.byteOffset + MAGIC.length, 4).getUint32(0, true);
  const headerStart = MAGIC.length + 4;
  const entries = JSON.parse(
    new TextDecoder().decode(raw.subarray(headerStart, headerStart + headerLength)),
  ) as Entry[];
  const payload = raw.subarray(headerStart + headerLength);
  const offsets: number[] = [];
  let offset = 0;
  for (const [, , stored] of entries) {
    offsets.push(offset);
    offset += stored;
  }
  if (offset !== payload.length) throw new Error("truncated data directory template");
  return { entries, payload, offsets };
}

/** Writes the template into dir, which must not exist yet. Folders 0700, files 0600. */
export function unpackTemplate(template: Template, dir: string) {
  mkdirSync(dir, { mode: 0o700 });
  template.entries.forEach(([path, size, stored], i) => {
    const target = join(dir, path);
    if (size < 0) {
      mkdirSync(target, { mode: 0o700 });
      return;
    }
    const fd = openSync(target, "wx", 0o600);
    try {
      const start = template.offsets[i]!;
      if (stored > 0) writeSync(fd, template.payload, start, stored, 0);
      if (size > stored) ftruncateSync(fd, size);
    } finally {
      closeSync(fd);
    }
  });
}

/** Runs initdb into a scratch folder, shuts the database down cleanly and packs the result. */
export async function createTemplateArchive(files: PgliteFiles): Promise<Uint8Array> {
  const scratch = mkdtempSync(join(tmpdir(), "voice-service-initdb-"));
  try {
    const dataDir = join(scratch, "pgdata");
    const db = await PGlite.create({
      dataDir,
      pgliteWasmModule: await files.engine(),
      initdbWasmModule: await files.initdb(),
      fsBundle: await files.fsBundle(),
    });
    await db.close();
    return packDataDir(dataDir);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function templateCacheFile(files: PgliteFiles): string | null {
  const dir = files.templateCacheDir();
  return dir ? join(dir, `${TEMPLATE_ASSET}-pglite-${files.version}.gz`) : null;
}

/** The embedded template, else the cached one, else a new one (then cached when possible). */
export async function loadTemplate(files: PgliteFiles, log: Logger): Promise<Template> {
  const embedded = files.embeddedTemplate();
  if (embedded) return parseTemplate(new Uint8Array(await embedded.arrayBuffer()));

  const cacheFile = templateCacheFile(files);
  if (cacheFile && existsSync(cacheFile)) {
    try {
      return parseTemplate(readFileSync(cacheFile));
    } catch (err) {
      log.warn("ignoring a damaged data directory template", {
        file: cacheFile,
        error: (err as Error).message,
      });
    }
  }
  log.info("initialising the embedded database template (once per installation, a few seconds)");
  const archive = await createTemplateArchive(files);
  if (cacheFile) {
    try {
      mkdirSync(join(cacheFile, ".."), { recursive: true });
      const partial = `${cacheFile}.${process.pid}.tmp`;
      writeFileSync(partial, archive);
      renameSync(partial, cacheFile);
    } catch (err) {
      log.warn("could not cache the data directory template", { error: (err as Error).message });
    }
  }
  return parseTemplate(archive);
}
