/**
 * What each runtime adapter (bun.ts, deno.ts) provides, and all that the rest of the process knows of
 * the runtime running it. Only types and one name live here, so any module may import this file;
 * the adapters themselves are imported by the process entry alone (main.ts, through current.ts).
 */

/** The application's handler: the request, and the socket's peer address as the adapter saw it. */
export type FetchHandler = (req: Request, env: { remoteAddress?: string }) => Response | Promise<Response>;

export interface ServeOptions {
  port: number;
  hostname: string;
}

export interface RunningServer {
  /** The port listened on (the one picked when `port` was 0). */
  port: number;
  /** Stops accepting, lets in-flight requests finish, then resolves. */
  stop(): Promise<void>;
}

/** Where the embedded database's engine files come from: node_modules from the sources, the executable's own files once compiled. */
export interface PgliteFiles {
  /** PGlite's version: a data directory template is only valid for the version that made it. */
  version: string;
  /** Where the engine is read from (`/$bunfs/…` inside Bun's executable), for the logs. */
  enginePath: string;
  /** The compiled PostgreSQL engine. */
  engine(): Promise<WebAssembly.Module>;
  /** The compiled initdb, only needed when no data directory template exists yet. */
  initdb(): Promise<WebAssembly.Module>;
  /** PGlite's read-only file bundle (share/, lib/ …). */
  fsBundle(): Promise<Blob>;
  /** Starts the embedded database's thread, the worker db/engine/pgliteWorker.ts, where this runtime finds it. */
  thread(): Worker;
  /** The data directory template embedded by the build, or null when running from the sources. */
  embeddedTemplate(): Blob | null;
  /** Where the sources keep the template between runs (node_modules/.cache), or null in an executable. */
  templateCacheDir(): string | null;
}

/** Name prefix of the pre-initialised data directory that the executable build embeds next to the code. */
export const TEMPLATE_ASSET = "pgdata-template";

export interface Runtime {
  /** `bun 1.4.5`, `deno 2.9.6`: logged at start. */
  name: string;
  /** Serves `fetch` over HTTP/1.1, handing it the socket's peer address (never a client-supplied header). */
  serve(fetch: FetchHandler, opts: ServeOptions): RunningServer;
  pglite: PgliteFiles;
}
