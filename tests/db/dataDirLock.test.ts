import { afterAll, describe, expect, test } from "bun:test";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DataDirInUseError, LOCK_TIMING, lockDataDir } from "../../src/db/engine/dataDirLock.ts";
import { waitUntil } from "../helpers/wait.ts";
import { spawnService } from "./serviceProcess.ts";

/**
 * The DATA_DIR lock without the database: a holder elsewhere (another container's pid namespace,
 * another host) is judged by its heartbeat, never by a pid that means nothing here.
 */

const TAKE_LOCK = join(import.meta.dir, "fixtures", "takeLock.ts");
const FAST = { heartbeatMs: 50, staleMs: 1_000 };
const folders: string[] = [];
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "vs-lock-"));
  folders.push(dir);
  return dir;
}

const lockPath = (dir: string) => join(dir, "voice-service.lock");
const readLock = (dir: string) => JSON.parse(readFileSync(lockPath(dir), "utf8"));

/**
 * A lock written by a process in another pid namespace. Its pid is ours, as when both are pid 1 of
 * their containers: a pid-based lock counts such a holder as "us" (so not alive) and takes it over.
 */
function foreignLock(dir: string, opts: { heartbeatAgeMs?: number } = {}): string {
  const content = JSON.stringify({
    owner: "f".repeat(32),
    pid: process.pid,
    started: null,
    namespace: "another-container/00000000-0000-0000-0000-000000000000/pid:[4026530000]",
  });
  writeFileSync(lockPath(dir), content);
  const at = new Date(Date.now() - (opts.heartbeatAgeMs ?? 0));
  utimesSync(lockPath(dir), at, at);
  return content;
}

/**
 * Keeps a lock's heartbeat going, as its live holder would; `clockOffsetMs`: the holder's clock (or the
 * file server's) that far off ours, so every beat looks that old here.
 */
function beating(dir: string, everyMs: number, clockOffsetMs = 0): () => void {
  const timer = setInterval(() => {
    const now = new Date(Date.now() + clockOffsetMs);
    utimesSync(lockPath(dir), now, now);
  }, everyMs);
  return () => clearInterval(timer);
}

describe("the DATA_DIR lock", () => {
  test("a clean start takes it at once, with an owner id and where its pid means something", async () => {
    const dir = tempDir();
    const started = performance.now();
    const lock = await lockDataDir(dir);
    // No waiting for anything: far below one heartbeat.
    expect(performance.now() - started).toBeLessThan(LOCK_TIMING.heartbeatMs / 2);
    const content = readLock(dir);
    expect(content.owner).toMatch(/^[0-9a-f]{32}$/);
    expect(content.pid).toBe(process.pid);
    expect(content.namespace).toContain("pid:[");
    lock.release();
    expect(() => statSync(lockPath(dir))).toThrow();
  });

  test("the holder beats: the lock's modification time keeps moving", async () => {
    const dir = tempDir();
    const lock = await lockDataDir(dir, dir, { timing: FAST });
    const old = new Date(Date.now() - 60_000);
    utimesSync(lockPath(dir), old, old);
    await waitUntil("a heartbeat", () => Date.now() - statSync(lockPath(dir)).mtimeMs < 5_000);
    lock.release();
  });

  test("a live holder in another pid namespace is never taken over, however long one tries", async () => {
    const dir = tempDir();
    const content = foreignLock(dir);
    const stop = beating(dir, FAST.heartbeatMs);
    try {
      const until = Date.now() + 3 * FAST.staleMs;
      let attempts = 0;
      while (Date.now() < until) {
        const error = await lockDataDir(dir, dir, { timing: FAST }).catch((err) => err);
        expect(error).toBeInstanceOf(DataDirInUseError);
        expect(error.message).toBe(`DATA_DIR ${dir} is in use by process ${process.pid}`);
        attempts++;
      }
      expect(attempts).toBeGreaterThan(0);
      expect(readFileSync(lockPath(dir), "utf8")).toBe(content);
    } finally {
      stop();
    }
  });

  test("an old modification time is no proof: a holder elsewhere whose clock is an hour behind, still beating, is never taken over", async () => {
    const dir = tempDir();
    const HOUR = 3600_000;
    const content = foreignLock(dir, { heartbeatAgeMs: HOUR });
    const stop = beating(dir, FAST.heartbeatMs, -HOUR);
    try {
      const until = Date.now() + 3 * FAST.staleMs;
      while (Date.now() < until) {
        const error = await lockDataDir(dir, dir, { timing: FAST }).catch((err) => err);
        expect(error).toBeInstanceOf(DataDirInUseError);
      }
      expect(readFileSync(lockPath(dir), "utf8")).toBe(content);
    } finally {
      stop();
    }
  });

  test("a holder elsewhere that stopped beating is taken over only once unchanged for the stale period, by our own clock", async () => {
    const dir = tempDir();
    // Its last beat looks an hour old here: still watched for the whole stale period before any decision.
    foreignLock(dir, { heartbeatAgeMs: 3600_000 });
    const waits: number[] = [];
    const started = performance.now();
    const lock = await lockDataDir(dir, dir, { timing: FAST, onWait: ({ pid }) => waits.push(pid) });
    expect(performance.now() - started).toBeGreaterThanOrEqual(FAST.staleMs);
    expect(waits).toEqual([process.pid]);
    expect(readLock(dir).owner).not.toBe("f".repeat(32));
    lock.release();
  });

  test("a takeover guard left by a process that died taking over is removed once it stood still for the stale period", async () => {
    const dir = tempDir();
    foreignLock(dir, { heartbeatAgeMs: 3600_000 });
    // Only the creator of the guard may move a lock: one left behind blocks every takeover until it is stale.
    writeFileSync(`${lockPath(dir)}.takeover`, "0".repeat(32));
    const started = performance.now();
    const lock = await lockDataDir(dir, dir, { timing: FAST });
    // The lock watched for the stale period, then the guard too.
    expect(performance.now() - started).toBeGreaterThanOrEqual(2 * FAST.staleMs);
    expect(readLock(dir).owner).not.toBe("f".repeat(32));
    expect(existsSync(`${lockPath(dir)}.takeover`)).toBe(false);
    lock.release();
  });

  test("a takeover leaves nothing behind but its own lock (no guard, no file set aside)", async () => {
    const dir = tempDir();
    foreignLock(dir, { heartbeatAgeMs: 3600_000 });
    const lock = await lockDataDir(dir, dir, { timing: FAST });
    expect(readdirSync(dir).filter((f) => f.startsWith("voice-service.lock"))).toEqual([
      "voice-service.lock",
    ]);
    lock.release();
  });

  test("a holder elsewhere that stops beating is watched, then taken over once stale", async () => {
    const dir = tempDir();
    foreignLock(dir);
    const lastBeat = statSync(lockPath(dir)).mtimeMs;
    const waits: number[] = [];
    const lock = await lockDataDir(dir, dir, { timing: FAST, onWait: ({ pid }) => waits.push(pid) });
    expect(waits).toEqual([process.pid]);
    // Not before its heartbeat was stale: more than staleMs after the beat the file records.
    expect(Date.now() - lastBeat).toBeGreaterThan(FAST.staleMs);
    expect(readLock(dir).owner).not.toBe("f".repeat(32));
    lock.release();
  });

  test("the holder finds out when another process took its lock, and is told to stop", async () => {
    const dir = tempDir();
    let lost = 0;
    const lock = await lockDataDir(dir, dir, { timing: FAST, onLost: () => lost++ });
    foreignLock(dir);
    await waitUntil("the lost lock to be noticed", () => lost > 0);
    await Bun.sleep(3 * FAST.heartbeatMs);
    expect(lost).toBe(1);
    lock.release();
    // Releasing a lock that is not ours leaves the other's file alone.
    expect(readLock(dir).owner).toBe("f".repeat(32));
  });

  test("refresh beats when the event loop was held past a beat, and finds out at once that the lock was lost", async () => {
    const dir = tempDir();
    let lost = 0;
    const lock = await lockDataDir(dir, dir, { timing: FAST, onLost: () => lost++ });
    const old = new Date(Date.now() - 60_000);
    utimesSync(lockPath(dir), old, old);
    // No beat due yet: nothing is touched.
    lock.refresh();
    expect(statSync(lockPath(dir)).mtimeMs).toBe(old.getTime());
    // The thread held past a beat (as by a long statement): the interval could not run; refresh beats.
    const heldUntil = performance.now() + 3 * FAST.heartbeatMs;
    while (performance.now() < heldUntil) {}
    lock.refresh();
    expect(Date.now() - statSync(lockPath(dir)).mtimeMs).toBeLessThan(5_000);
    // Held again, and meanwhile another process took the lock: refresh says so before returning,
    // so nothing more is written.
    const stalledUntil = performance.now() + 3 * FAST.heartbeatMs;
    while (performance.now() < stalledUntil) {}
    foreignLock(dir);
    lock.refresh();
    expect(lost).toBe(1);
    lock.release();
    expect(readLock(dir).owner).toBe("f".repeat(32));
  });

  test("a refresh after the release (a late statement while the database closes) is no lost lock", async () => {
    const dir = tempDir();
    let lost = 0;
    const lock = await lockDataDir(dir, dir, { timing: FAST, onLost: () => lost++ });
    lock.release();
    expect(existsSync(lockPath(dir))).toBe(false);
    // Past a beat, as when the engine runs a last batch of the closing driver.
    const heldUntil = performance.now() + 3 * FAST.heartbeatMs;
    while (performance.now() < heldUntil) {}
    lock.refresh();
    await Bun.sleep(3 * FAST.heartbeatMs);
    expect(lost).toBe(0);
    expect(existsSync(lockPath(dir))).toBe(false);
  });

  test("a second lock in the same process is refused", async () => {
    const dir = tempDir();
    const lock = await lockDataDir(dir);
    await expect(lockDataDir(dir)).rejects.toThrow(`DATA_DIR ${dir} is in use by process ${process.pid}`);
    lock.release();
  });

  test("six processes taking over one stale lock at once: exactly one gets it", async () => {
    const dir = tempDir();
    foreignLock(dir, { heartbeatAgeMs: LOCK_TIMING.staleMs + 5_000 });
    const children = Array.from({ length: 6 }, () =>
      spawnService([], {
        command: [process.execPath, TAKE_LOCK],
        env: {
          DATA_DIR: dir,
          LOCK_HEARTBEAT_MS: String(FAST.heartbeatMs),
          LOCK_STALE_MS: String(FAST.staleMs),
        },
      }),
    );
    // The five refused exit at once; the one holding the lock waits to be told to let go.
    let exited = 0;
    for (const c of children) void c.exited.then(() => exited++);
    await waitUntil("five refused processes to exit", () => exited >= 5, { timeoutMs: 25_000 });
    writeFileSync(join(dir, "release"), "");
    await Promise.all(children.map((c) => c.exited));
    const outcomes = children.map((c) => c.output().trim());
    expect(outcomes.filter((o) => o === "acquired")).toHaveLength(1);
    const winner = children[outcomes.indexOf("acquired")]!;
    for (const o of outcomes.filter((o) => o !== "acquired")) {
      expect(o).toBe(`refused: DATA_DIR ${dir} is in use by process ${winner.pid}`);
    }
  });
});
