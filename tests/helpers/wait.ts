/**
 * The one way a test waits for something that happens on its own (a timer fires, a process logs a
 * line, a page sends a request). Bounds are generous: the suite runs on busy machines, and a bound
 * here only decides how long a broken test takes to fail. Tests that assert timing measure it
 * themselves.
 */

export interface WaitOptions {
  /** Fail after this many milliseconds (default 15 s). */
  timeoutMs?: number;
  /** Check again after this many milliseconds (default 20 ms). */
  stepMs?: number;
}

/**
 * Calls `check` until it returns something other than `undefined`, `null` or `false`, and returns
 * that. Fails after `timeoutMs` with "timed out after N ms waiting for <what>"; `what` may be a
 * function, to describe the state at that moment (a process's output, say). An error thrown by
 * `check` fails the wait at once.
 */
export async function waitUntil<T>(
  what: string | (() => string),
  check: () => T | Promise<T>,
  opts: WaitOptions = {},
): Promise<Exclude<T, undefined | null | false>> {
  const { timeoutMs = 15_000, stepMs = 20 } = opts;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) {
      return value as Exclude<T, undefined | null | false>;
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === "string" ? what : what()}`,
      );
    }
    await Bun.sleep(stepMs);
  }
}
