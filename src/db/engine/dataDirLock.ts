import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";

/**
 * One process per DATA_DIR. PGlite has no lock of its own: two processes on one folder would both
 * write the same PostgreSQL files and corrupt them.
 *
 * The lock is a file holding the owner's pid and its start time. It is created complete and
 * atomically (written aside, then hard-linked into place, which fails if a lock exists). A lock
 * whose process is gone (kill -9, power cut) or whose pid now belongs to another process (pid
 * reuse, e.g. pid 1 in a restarted container) is stale and taken over.
 */

export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`DATA_DIR ${dataDir} is in use by process ${pid}`);
    this.name = "DataDirInUseError";
  }
}

export interface DataDirLock {
  /** Removes the lock file if it is still ours. Idempotent. */
  release(): void;
}

interface LockContent {
  pid: number;
  /** Start time of the process in clock ticks since boot (Linux), so a reused pid is told apart. */
  started: string | null;
}

const LOCK_FILE = "voice-service.lock";
/** Lock files held by this process: a second open of the same folder in one process is refused too. */
const heldHere = new Set<string>();

export function lockDataDir(dataDir: string, displayName = dataDir): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  const mine = JSON.stringify({ pid: process.pid, started: processStartTime(process.pid) });
  if (heldHere.has(path)) throw new DataDirInUseError(displayName, process.pid);

  for (let attempt = 0; attempt < 10; attempt++) {
    if (tryCreate(path, mine)) {
      heldHere.add(path);
      const release = () => {
        if (!heldHere.delete(path)) return;
        process.off("exit", release);
        if (readRaw(path) === mine) rmSync(path, { force: true });
      };
      // A process that exits without closing the database (fatal error) leaves no lock behind.
      process.on("exit", release);
      return { release };
    }
    const raw = readRaw(path);
    if (raw === null) continue; // released between our two steps: try again
    const owner = parse(raw);
    if (owner && isAlive(owner)) throw new DataDirInUseError(displayName, owner.pid);
    takeOverStale(path, raw);
  }
  throw new Error(`could not lock DATA_DIR ${displayName}: its lock file keeps changing`);
}

function tryCreate(path: string, content: string): boolean {
  const aside = `${path}.${process.pid}.tmp`;
  writeFileSync(aside, content, { mode: 0o600 });
  try {
    linkSync(aside, path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    rmSync(aside, { force: true });
  }
}

/**
 * Moves a stale lock aside. If several processes start at once, only one rename finds the stale
 * file; one that moved a fresh lock instead (taken between its read and its rename) puts it back.
 */
function takeOverStale(path: string, staleRaw: string) {
  const aside = `${path}.${process.pid}.stale`;
  try {
    renameSync(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  try {
    if (readRaw(aside) !== staleRaw) linkSync(aside, path);
  } catch {
    // Another lock appeared meanwhile: the next attempt reads it.
  } finally {
    rmSync(aside, { force: true });
  }
}

function readRaw(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

function parse(raw: string): LockContent | null {
  try {
    const value = JSON.parse(raw) as Partial<LockContent>;
    return typeof value.pid === "number" && value.pid > 0
      ? { pid: value.pid, started: typeof value.started === "string" ? value.started : null }
      : null;
  } catch {
    return null;
  }
}

function isAlive(owner: LockContent): boolean {
  // Our own pid in a file we do not hold: an earlier process that had the same pid.
  if (owner.pid === process.pid) return false;
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const started = processStartTime(owner.pid);
  return !(owner.started && started && started !== owner.started);
}

/** Field 22 of /proc/<pid>/stat; null where /proc is not available. */
function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) is in parentheses and may contain spaces: count after the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}
