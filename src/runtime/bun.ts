/**
 * The Bun adapter: the only place that touches Bun's server API. It hands the socket peer address
 * to the app as a binding, so the core never reads a client-supplied header for it.
 */
export interface RunningServer {
  port: number;
  /** Stops accepting, lets in-flight requests finish, then resolves. */
  stop(): Promise<void>;
}

type FetchHandler = (req: Request, env: { remoteAddress?: string }) => Response | Promise<Response>;

export function serve(fetch: FetchHandler, opts: { port: number; hostname: string }): RunningServer {
  const server = Bun.serve({
    port: opts.port,
    hostname: opts.hostname,
    // Bodies are bounded by the app (64 KiB / 1 MiB); this is only a backstop.
    maxRequestBodySize: 2 * 1024 * 1024,
    fetch: (req, srv) => fetch(req, { remoteAddress: srv.requestIP(req)?.address }),
  });
  return {
    port: server.port ?? opts.port,
    stop: async () => {
      await server.stop(false);
    },
  };
}
