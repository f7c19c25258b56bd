/**
 * The embedded database's own thread (a Web Worker, on Bun and Deno alike): it holds the one PGlite
 * instance and runs what the main thread sends it, one message at a time, in order (pgliteThread.ts
 * is the other side). PGlite's WebAssembly runs each statement to its end without yielding; on the
 * main thread that held the HTTP server and the timers for as long, and left the second core idle.
 *
 * Nothing here depends on the runtime: the main thread hands over the compiled engine and the file
 * bundle (both cloned by postMessage), so the executable's embedded files are read where they live.
 */
import { PGlite } from "@electric-sql/pglite";
import { concatBytes } from "../../bytes.ts";
import type { ThreadReply, ThreadRequest } from "./pgliteThread.ts";

let db: PGlite | null = null;

/** Every request waits for the one before it: PGlite is one session, and its answers keep their order. */
let queue: Promise<void> = Promise.resolve();

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<ThreadRequest>) => void) | null;
  postMessage(message: ThreadReply, transfer?: Transferable[]): void;
};

scope.onmessage = (e) => {
  const request = e.data;
  queue = queue.then(() => handle(request));
};

async function handle(request: ThreadRequest): Promise<void> {
  try {
    switch (request.op) {
      case "open": {
        db = await PGlite.create({
          dataDir: request.dataDir,
          pgliteWasmModule: request.engine,
          fsBundle: request.fsBundle,
          startParams: [...PGlite.defaultStartParams, ...request.startParams],
        });
        return reply({ id: request.id, ok: true });
      }
      case "protocol": {
        const answer = await runProtocol(open(), request.bytes);
        return reply({ id: request.id, ok: true, bytes: answer }, [answer.buffer as ArrayBuffer]);
      }
      case "query": {
        const result = await open().query<Record<string, unknown>>(request.sql);
        return reply({ id: request.id, ok: true, rows: result.rows });
      }
      case "reset": {
        // What the next connection must not inherit: an open transaction, the last one's prepared
        // statements (named per connection by the driver). Session advisory locks are kept.
        const pglite = open();
        if (pglite.isInTransaction()) await pglite.exec("rollback");
        await pglite.exec("deallocate all");
        return reply({ id: request.id, ok: true });
      }
      case "close": {
        // The main thread ends this thread once it has the answer.
        await db?.close();
        db = null;
        return reply({ id: request.id, ok: true });
      }
    }
  } catch (err) {
    reply({ id: request.id, ok: false, message: err instanceof Error ? err.message : String(err) });
  }
}

function open(): PGlite {
  if (!db) throw new Error("The embedded database is not open.");
  return db;
}

/** Runs whole protocol messages and returns every answer byte, in one buffer of its own. */
async function runProtocol(pglite: PGlite, bytes: Uint8Array): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let length = 0;
  await pglite.execProtocolRawStream(bytes, {
    // No file-system sync: the data directory is a plain Node file system mount, whose sync is a no-op.
    syncToFs: false,
    onRawData: (chunk: Uint8Array) => {
      // A view into PGlite's memory, reused by the next call: copy it out.
      if (chunk.length === 0) return;
      parts.push(chunk.slice());
      length += chunk.length;
    },
  });
  return parts.length === 1 ? parts[0]! : concatBytes(parts, length);
}

function reply(message: ThreadReply, transfer: Transferable[] = []): void {
  scope.postMessage(message, transfer);
}
