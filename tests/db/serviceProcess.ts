import { join } from "node:path";
import type { Subprocess } from "bun";
import { waitUntil } from "../helpers/wait.ts";

/** Runs the service (from the sources, or an executable) as a child process, as an operator would. */

export const MAIN = join(import.meta.dir, "..", "..", "src", "main.ts");

export interface ServiceProcess {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  pid: number;
  /** stdout and stderr so far. */
  output(): string;
  /** stdout alone so far (the JSON log lines). */
  stdout(): string;
  /** Resolves with the first match of re in the output; rejects if the process exits first or on timeout. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Waits for the "listening" log line and returns the URL it gives. */
  listening(timeoutMs?: number): Promise<string>;
  exited: Promise<number>;
}

export function spawnService(
  args: string[],
  opts: { env?: Record<string, string>; cwd?: string; command?: string[] } = {},
): ServiceProcess {
  const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: "info", ...opts.env };
  if (!opts.env?.DATABASE_URL) delete env.DATABASE_URL;
  const proc = Bun.spawn([...(opts.command ?? [process.execPath, MAIN]), ...args], {
    env,
    cwd: opts.cwd,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let text = "";
  let stdout = "";
  const pump = async (stream: ReadableStream<Uint8Array>, isStdout: boolean) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      const piece = decoder.decode(chunk, { stream: true });
      text += piece;
      if (isStdout) stdout += piece;
    }
  };
  const pumped = Promise.all([pump(proc.stdout, true), pump(proc.stderr, false)]);
  let done = false;
  const exited = proc.exited.then(async (code) => {
    await pumped;
    done = true;
    return code;
  });
  const waitFor = (re: RegExp, timeoutMs = 45_000) =>
    waitUntil(
      () => `${re} in the output:\n${text}`,
      () => {
        const match = text.match(re);
        if (!match && done) throw new Error(`process exited before ${re}:\n${text}`);
        return match;
      },
      { timeoutMs, stepMs: 10 },
    );
  return {
    proc,
    pid: proc.pid,
    output: () => text,
    stdout: () => stdout,
    waitFor,
    listening: async (timeoutMs) => {
      const [, url] = await waitFor(/"msg":"listening","url":"([^"]+)"/, timeoutMs);
      return url!;
    },
    exited,
  };
}

/** Sends SIGTERM and returns the exit code and how long the process took to exit. */
export async function stopService(service: ServiceProcess): Promise<{ code: number; ms: number }> {
  const started = performance.now();
  service.proc.kill("SIGTERM");
  const code = await service.exited;
  return { code, ms: performance.now() - started };
}
