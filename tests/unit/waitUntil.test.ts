import { describe, expect, test } from "bun:test";
import { waitUntil } from "../helpers/wait.ts";

describe("waitUntil", () => {
  test("returns the first value that is not undefined, null or false", async () => {
    let calls = 0;
    const value = await waitUntil("the third call", () => (++calls === 3 ? { calls } : undefined), {
      stepMs: 1,
    });
    expect(value).toEqual({ calls: 3 });
  });

  test("fails after the timeout, naming what it waited for", async () => {
    const started = Date.now();
    const err = await waitUntil("a condition that never holds", () => false, {
      timeoutMs: 50,
      stepMs: 5,
    }).catch((e: Error) => e);
    expect(String(err)).toBe("Error: timed out after 50 ms waiting for a condition that never holds");
    expect(Date.now() - started).toBeGreaterThanOrEqual(50);
  });

  test("describes the state at the moment it fails", async () => {
    let seen = 0;
    const err = await waitUntil(
      () => `seen ${seen}`,
      () => {
        seen++;
        return null;
      },
      { timeoutMs: 20, stepMs: 5 },
    ).catch((e: Error) => e);
    expect(String(err)).toBe(`Error: timed out after 20 ms waiting for seen ${seen}`);
  });

  test("an error thrown by the check fails the wait at once", async () => {
    const err = await waitUntil(
      "never",
      () => {
        throw new Error("the process exited");
      },
      { timeoutMs: 10_000 },
    ).catch((e: Error) => e);
    expect(String(err)).toBe("Error: the process exited");
  });
});
