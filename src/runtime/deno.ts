/**
 * The Deno adapter: the only place that touches Deno's own API. Like the Bun adapter it hands the
 * socket peer address to the app as a binding, and reads PGlite's engine files from node_modules
 * (Deno runs from the sources: `npm run start:deno`).
 */
import { fileURLToPath } from "node:url";
import pglitePackage from "../../node_modules/@electric-sql/pglite/package.json" with { type: "json" };
import type { FetchHandler, PgliteFiles, RunningServer, Runtime, ServeOptions } from "./runtime.ts";

/** The part of Deno's API used here: declared locally, so no other module can reach `Deno` unnoticed. */
interface DenoApi {
  version: { deno: string };
  serve(
    options: { port: number; hostname: string; onListen(addr: unknown): void },
    handler: (req: Request, info: { remoteAddr: { hostname: string } }) => Response | Promise<Response>,
  ): { addr: { port: number }; shutdown(): Promise<void>; finished: Promise<void> };
  readFile(path: URL): Promise<Uint8Array<ArrayBuffer>>;
}

const Deno = (globalThis as unknown as { Deno: DenoApi }).Deno;

/**
 * How long a stop waits for the requests in flight that carry a body before closing (the process
 * is forced to exit after 9 s in all).
 */
const BODY_DRAIN_MS = 5_000;

export function serve(fetch: FetchHandler, opts: ServeOptions): RunningServer {
  // Requests with a body still being answered. Deno 2.9's shutdown() makes a request body that has
  // not fully arrived unreadable at once (denoland/deno#36809: the request would fail with a 500), so a
  // stop lets these finish first; requests without a body are unaffected and cost nothing here.
  const withBody = new Set<Promise<Response>>();
  const server = Deno.serve(
    {
      port: opts.port,
      hostname: opts.hostname,
      // Without it Deno prints "Listening on …" to stdout, which carries JSON log lines only.
      onListen: () => {},
    },
    // Deno sets no limit on request bodies: the app bounds them itself and answers 413 in its envelope.
    (req, info) => {
      const answer = fetch(req, { remoteAddress: info.remoteAddr.hostname });
      if (req.body === null || !(answer instanceof Promise)) return answer;
      withBody.add(answer);
      const done = () => void withBody.delete(answer);
      answer.then(done, done);
      return answer;
    },
  );
  return {
    port: server.addr.port,
    stop: async () => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.allSettled([...withBody]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, BODY_DRAIN_MS);
        }),
      ]);
      clearTimeout(timer);
      // Stops accepting and resolves once the requests in flight have been answered.
      await server.shutdown();
    },
  };
}

const dist = new URL("../../node_modules/@electric-sql/pglite/dist/", import.meta.url);
const compile = (name: string) => Deno.readFile(new URL(name, dist)).then((b) => WebAssembly.compile(b));

let engine: Promise<WebAssembly.Module> | undefined;
let initdb: Promise<WebAssembly.Module> | undefined;

export const denoPgliteFiles: PgliteFiles = {
  version: pglitePackage.version,
  enginePath: fileURLToPath(new URL("pglite.wasm", dist)),
  // Compiled once per process; the promise is shared so compilation can start early and overlap other work.
  engine: () => {
    engine ??= compile("pglite.wasm");
    return engine;
  },
  initdb: () => {
    initdb ??= compile("initdb.wasm");
    return initdb;
  },
  fsBundle: async () => new Blob([await Deno.readFile(new URL("pglite.data", dist))]),
  thread: () => new Worker(new URL("../db/engine/pgliteWorker.ts", import.meta.url).href, { type: "module" }),
  embeddedTemplate: () => null,
  // The same cache as Bun's from the sources: the template depends on PGlite's version, not on the runtime.
  templateCacheDir: () => fileURLToPath(new URL("../../node_modules/.cache/voice-service", import.meta.url)),
};

export const denoRuntime: Runtime = {
  name: `deno ${Deno.version.deno}`,
  serve,
  pglite: denoPgliteFiles,
};
