/**
 * The Bun adapter: the only place that touches Bun's server API. It hands the socket peer address
 * to the app as a binding, so the core never reads a client-supplied header for it.
 */
import { bunPgliteFiles } from "./bunFiles.ts";
import type { FetchHandler, RunningServer, Runtime, ServeOptions } from "./runtime.ts";

export function serve(fetch: FetchHandler, opts: ServeOptions): RunningServer {
  const server = Bun.serve({
    port: opts.port,
    hostname: opts.hostname,
    // A port another process listens on is an error, as on Deno: with `development: false` Bun would
    // otherwise bind it too (SO_REUSEPORT) and the two processes would share its connections.
    reusePort: false,
    // The app bounds bodies itself (64 KiB / 1 MiB), on Content-Length and while reading, and answers
    // 413 in the error envelope. A lower limit here would answer first, with an empty body.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    // Never Bun's development error page (it shows stack traces), whatever NODE_ENV says.
    development: false,
    fetch: (req, srv) => fetch(req, { remoteAddress: srv.requestIP(req)?.address }),
  });
  return {
    port: server.port ?? opts.port,
    stop: async () => {
      await server.stop(false);
    },
  };
}

export const bunRuntime: Runtime = {
  name: `bun ${Bun.version}`,
  serve,
  pglite: bunPgliteFiles,
};
