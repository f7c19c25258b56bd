import type { Subprocess } from "bun";

/** A `bun src/main.ts serve` child process on a given database, its log lines kept. */
export interface ServerProcess {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  lines: string[];
  /** Resolves with the exit code. */
  exited: Promise<number>;
}

const ROOT = new URL("../../", import.meta.url).pathname;

export async function startServer(env: Record<string, string>, timeoutMs = 30_000): Promise<ServerProcess> {
  const proc = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
    cwd: ROOT,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const lines: string[] = [];
  let resolveUrl: (url: string) => void = () => {};
  const urlPromise = new Promise<string>((resolve) => {
    resolveUrl = resolve;
  });
  // Drain stdout continuously, or a chatty child would block on a full pipe.
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of proc.stdout) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl = buffer.indexOf("\n");
      while (nl >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        lines.push(line);
        if (line.includes('"msg":"listening"')) resolveUrl(JSON.parse(line).url);
        nl = buffer.indexOf("\n");
      }
    }
  })();
  void (async () => {
    for await (const chunk of proc.stderr) lines.push(new TextDecoder().decode(chunk));
  })();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const url = await Promise.race([
    urlPromise,
    proc.exited.then((code) => {
      throw new Error(`server exited with ${code} before listening:\n${lines.join("\n")}`);
    }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        proc.kill(9);
        reject(new Error(`server did not listen within ${timeoutMs} ms:\n${lines.join("\n")}`));
      }, timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
  return { proc, url, lines, exited: proc.exited };
}

/** Runs `fn` over `items` with at most `concurrency` at once. */
export async function pool<T, R>(items: T[], concurrency: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}
