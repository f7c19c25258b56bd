import { randomBytes } from "node:crypto";
import {
  closeSync,
  fstatSync,
  linkSync,
  openSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * One process per DATA_DIR, whichever machine, container or pid namespace it runs in. PGlite has no
 * lock of its own: two processes on one folder would both write the same PostgreSQL files and
 * corrupt them.
 *
 * The lock is a file holding a random owner id, the owner's pid and where that pid means something
 * (host, boot, pid namespace). It is created complete and atomically (written aside, then
 * hard-linked into place, which fails if a lock exists). Its holder proves it is alive by touching
 * the file (its modification time is the heartbeat) every few seconds, and checks at each beat that
 * the file is still its own.
 *
 * Another process decides about an existing lock as follows:
 * - written from its own pid namespace (same host, boot and namespace): the pid says it all, at once:
 *   a live process holds it (refused); a dead one, or a reused pid, left it (taken over);
 * - written from elsewhere (another container sharing the volume, another host): pids prove nothing
 *   there. A heartbeat older than `staleMs` is a holder that is gone (taken over); a fresher one is
 *   watched until it beats (refused) or goes stale (taken over), so a crashed container's successor
 *   starts by itself within `staleMs`;
 * - a file that is not a lock at all (empty, garbage) is taken over.
 * A lock written by an earlier version (a pid and start time, no owner id) is judged by its pid.
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
  /** Stops the heartbeat and removes the lock file if it is still ours. Idempotent. */
  release(): void;
}

export interface LockTiming {
  /** How often the holder touches the lock. */
  heartbeatMs: number;
  /** A heartbeat older than this is a holder that is gone. Several heartbeats, so a busy holder is not. */
  staleMs: number;
}

export const LOCK_TIMING: LockTiming = { heartbeatMs: 5_000, staleMs: 15_000 };

export interface LockOptions {
  timing?: LockTiming;
  /**
   * Called when the holder finds the lock is no longer its own (another process took it over while
   * this one did not beat, e.g. suspended for longer than `staleMs`). The holder must stop writing.
   */
  onLost?: () => void;
  /** Told when the lock belongs to a process elsewhere and is being watched before deciding. */
  onWait?: (owner: { pid: number; heartbeatAgeMs: number }) => void;
}

interface LockContent {
  /** Random id of the holder: the only thing that tells two holders apart everywhere. */
  owner: string | null;
  pid: number;
  /** Start time of the process in clock ticks since boot (Linux), so a reused pid is told apart. */
  started: string | null;
  /** Host, boot and pid namespace the pid belongs to; null in a lock of an earlier version. */
  namespace: string | null;
}

const LOCK_FILE = "voice-service.lock";
/** Lock files held by this process: a second open of the same folder in one process is refused too. */
const heldHere = new Set<string>();

export async function lockDataDir(
  dataDir: string,
  displayName = dataDir,
  opts: LockOptions = {},
): Promise<DataDirLock> {
  const timing = opts.timing ?? LOCK_TIMING;
  const path = join(dataDir, LOCK_FILE);
  if (heldHere.has(path)) throw new DataDirInUseError(displayName, process.pid);
  const owner = randomBytes(16).toString("hex");
  const mine = JSON.stringify({
    owner,
    pid: process.pid,
    started: processStartTime(process.pid),
    namespace: ourNamespace(),
  } satisfies LockContent);

  for (let attempt = 0; attempt < 20; attempt++) {
    if (tryCreate(path, mine, owner)) {
      heldHere.add(path);
      return hold(path, mine, timing, opts.onLost);
    }
    const seen = readLock(path);
    if (seen === null) continue; // released between our two steps: try again
    const holder = parse(seen.raw);
    const verdict = holder ? judge(holder, seen.mtimeMs, timing) : "stale";
    if (verdict === "alive") throw new DataDirInUseError(displayName, holder!.pid);
    if (verdict === "unknown") {
      opts.onWait?.({ pid: holder!.pid, heartbeatAgeMs: Date.now() - seen.mtimeMs });
      const watched = await watch(path, seen, timing);
      if (watched === "alive") throw new DataDirInUseError(displayName, holder!.pid);
      if (watched === "changed") continue;
    }
    takeOverStale(path, seen.raw, owner);
  }
  throw new Error(`could not lock DATA_DIR ${displayName}: its lock file keeps changing`);
}

/** Starts the heartbeat of a lock just created. */
function hold(path: string, mine: string, timing: LockTiming, onLost?: () => void): DataDirLock {
  let lost = false;
  const beat = setInterval(() => {
    let current: string | null;
    try {
      current = readRaw(path);
    } catch {
      return; // unreadable for a moment (the volume): the next beat tries again
    }
    if (current !== mine) {
      if (!lost) {
        lost = true;
        clearInterval(beat);
        onLost?.();
      }
      return;
    }
    try {
      const now = new Date();
      utimesSync(path, now, now);
    } catch {
      // Gone between the read and the touch: the next beat finds out.
    }
  }, timing.heartbeatMs);
  // The heartbeat never keeps the process alive on its own.
  beat.unref?.();
  const release = () => {
    clearInterval(beat);
    if (!heldHere.delete(path)) return;
    process.off("exit", release);
    if (readRaw(path) === mine) rmSync(path, { force: true });
  };
  // A process that exits without closing the database (fatal error) leaves no lock behind.
  process.on("exit", release);
  return { release };
}

type Verdict = "alive" | "stale" | "unknown";

function judge(holder: LockContent, mtimeMs: number, timing: LockTiming): Verdict {
  // A lock of an earlier version, or one written in our own pid namespace: its pid is meaningful here.
  if (holder.owner === null || (holder.namespace !== null && holder.namespace === ourNamespace())) {
    return isAlive(holder) ? "alive" : "stale";
  }
  return Date.now() - mtimeMs > timing.staleMs ? "stale" : "unknown";
}

/**
 * Watches a lock from elsewhere until its holder beats ("alive"), its heartbeat goes stale ("stale"),
 * or the file is replaced or removed ("changed": decide again).
 */
async function watch(path: string, seen: SeenLock, timing: LockTiming): Promise<Verdict | "changed"> {
  const pollMs = Math.max(10, Math.min(250, timing.heartbeatMs / 4));
  for (;;) {
    await sleep(pollMs);
    const now = readLock(path);
    if (now === null || now.raw !== seen.raw) return "changed";
    if (now.mtimeMs !== seen.mtimeMs) return "alive";
    if (Date.now() - now.mtimeMs > timing.staleMs) return "stale";
  }
}

function tryCreate(path: string, content: string, owner: string): boolean {
  const aside = `${path}.${owner}.tmp`;
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
 * Moves a stale lock aside (a rename: of several processes taking it over at once, one moves it, the
 * others find nothing and race to create theirs, which one wins). One that moved a fresh lock instead
 * (created between its decision and its rename) puts it back.
 */
function takeOverStale(path: string, staleRaw: string, owner: string) {
  const aside = `${path}.${owner}.stale`;
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

interface SeenLock {
  raw: string;
  mtimeMs: number;
}

/** The lock's content and heartbeat, read from one open file so both belong to the same lock. */
function readLock(path: string): SeenLock | null {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  try {
    return { mtimeMs: fstatSync(fd).mtimeMs, raw: readFileSync(fd, "utf8") };
  } finally {
    closeSync(fd);
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
    if (typeof value.pid !== "number" || value.pid <= 0) return null;
    return {
      owner: typeof value.owner === "string" ? value.owner : null,
      pid: value.pid,
      started: typeof value.started === "string" ? value.started : null,
      namespace: typeof value.namespace === "string" ? value.namespace : null,
    };
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

/**
 * Where our pid means something: the host, its boot (a pid namespace's number can come back after a
 * reboot) and our pid namespace. Two containers on one host differ by namespace; two hosts by name
 * and boot. Without /proc (not Linux: no pid namespaces), the host name alone.
 */
function ourNamespace(): string {
  if (namespace !== undefined) return namespace;
  const read = (f: () => string) => {
    try {
      return f().trim();
    } catch {
      return "";
    }
  };
  const boot = read(() => readFileSync("/proc/sys/kernel/random/boot_id", "utf8"));
  const pidNamespace = read(() => readlinkSync("/proc/self/ns/pid"));
  namespace = [hostname(), boot, pidNamespace].join("/");
  return namespace;
}

let namespace: string | undefined;
