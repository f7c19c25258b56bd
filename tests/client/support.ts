import { VoiceService } from "voice-service/client";
import { serve } from "../../src/runtime/bun.ts";
import type { RunningServer } from "../../src/runtime/runtime.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";

/**
 * The client's tests talk to a started server over HTTP, as an integrator's code would: the app of
 * a test context (its own database), served on a free port, and the client imported by its package
 * name (`voice-service/client`, the package's `exports`).
 */
export interface ClientWorld {
  ctx: TestContext;
  seed: Awaited<ReturnType<typeof seedOrganization>>;
  server: RunningServer;
  baseUrl: string;
  /** A client with this key (and options). */
  client(
    apiKey: string,
    opts?: Omit<ConstructorParameters<typeof VoiceService>[0], "apiKey" | "baseUrl">,
  ): VoiceService;
  close(): Promise<void>;
}

export async function startClientWorld(
  opts: {
    timers?: boolean;
    /** Answers some requests itself (pages of a browser test, on the API's origin); the app the others. */
    also?: (req: Request) => Response | undefined;
  } = {},
): Promise<ClientWorld> {
  const ctx = await createTestContext({
    timers: opts.timers ?? false,
    env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true" },
  });
  const seed = await seedOrganization(ctx);
  const server = serve((req, info) => opts.also?.(req) ?? ctx.app.fetch(req, info), {
    port: 0,
    hostname: "127.0.0.1",
  });
  const baseUrl = `http://127.0.0.1:${server.port}`;
  return {
    ctx,
    seed,
    server,
    baseUrl,
    client: (apiKey, more = {}) => new VoiceService({ apiKey, baseUrl, ...more }),
    close: async () => {
      await server.stop();
      await ctx.close();
    },
  };
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection, got a result");
}
