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
 *   there, and neither do clocks (another host's, or a file server's, may be off by minutes). So such a
 *   lock is never taken over at first sight, however old its modification time looks: it is watched,
 *   and taken over only once neither its content nor its modification time has changed for `staleMs`
 *   measured by this process's own monotonic clock; any change is a live holder (refused). A crashed
 *   container's successor thus starts by itself, `staleMs` after it first looked;
 * - a file that is not a lock at all (empty, garbage) is taken over.
 * A lock written by an earlier version (a pid and start time, no owner id) is judged by its pid.
 *
 * The holder beats on the main thread's event loop; PGlite runs on a thread of its own
 * (pgliteThread.ts), so a long statement (a migration building an index over a large table) does not
 * hold the beat back. `staleMs` is still a generous 60 s, for a process the machine itself stalls
 * (swapping, a suspended container), and the holder also checks the lock (`refresh`) right before
 * and after each batch of statements, so a holder that was stalled past it finds out that it lost
 * the lock before it writes anything more.
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
  /**
   * Beats now if a beat is due (the process was stalled), so a statement about to run has the whole
   * stale period before it; calls `onLost` if the lock is no longer ours. Cheap when nothing is due.
   */
  refresh(): void;
  /** Stops the heartbeat and removes the lock file if it is still ours. Idempotent. */
  release(): void;
}

export interface LockTiming {
  /** How often the holder touches the lock. */
  heartbeatMs: number;
  /**
   * A lock from elsewhere unchanged for this long, as this process watched it, is a holder that is
   * gone. Many heartbeats, so a holder stalled for a while is not (see above).
   */
  staleMs: number;
}

export const LOCK_TIMING: LockTiming = { heartbeatMs: 5_000, staleMs: 60_000 };

export interface LockOptions {
  timing?: LockTiming;
  /**
   * Called when the holder finds the lock is no longer its own (another process took it over while
   * this one did not beat, e.g. suspended for longer than `staleMs`). The holder must stop writing.
   */
  onLost?: () => void;
  /**
   * Told when the lock belongs to a process elsewhere and is being watched before deciding
   * (`heartbeatAgeMs` by this host's clock against the file's: for the log only, never decided on).
   */
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
    const verdict = holder ? judge(holder) : "stale";
    if (verdict === "alive") throw new DataDirInUseError(displayName, holder!.pid);
    if (verdict === "unknown") {
      opts.onWait?.({ pid: holder!.pid, heartbeatAgeMs: Date.now() - seen.mtimeMs });
      const watched = await watch(path, seen, timing);
      if (watched === "alive") throw new DataDirInUseError(displayName, holder!.pid);
      if (watched === "changed") continue;
    }
    await takeOverStale(path, seen, owner, timing);
  }
  throw new Error(`could not lock DATA_DIR ${displayName}: its lock file keeps changing`);
}

/** Starts the heartbeat of a lock just created. */
function hold(path: string, mine: string, timing: LockTiming, onLost?: () => void): DataDirLock {
  let lost = false;
  /**
   * Released: nothing to beat for any more. A late refresh (a statement the driver still hands to the
   * engine while the database closes) must not read the lock file this process removed as a lock lost.
   */
  let released = false;
  /** When this process last touched its lock (monotonic clock). */
  let lastBeat = performance.now();
  const beatNow = () => {
    if (lost || released) return;
    let current: string | null;
    try {
      current = readRaw(path);
    } catch {
      return; // unreadable for a moment (the volume): the next beat tries again
    }
    if (current !== mine) {
      lost = true;
      clearInterval(beat);
      onLost?.();
      return;
    }
    try {
      const now = new Date();
      utimesSync(path, now, now);
      lastBeat = performance.now();
    } catch {
      // Gone between the read and the touch: the next beat finds out.
    }
  };
  const beat = setInterval(beatNow, timing.heartbeatMs);
  // The heartbeat never keeps the process alive on its own.
  beat.unref?.();
  const release = () => {
    released = true;
    clearInterval(beat);
    if (!heldHere.delete(path)) return;
    process.off("exit", release);
    if (readRaw(path) === mine) rmSync(path, { force: true });
  };
  // A process that exits without closing the database (fatal error) leaves no lock behind.
  process.on("exit", release);
  return {
    refresh: () => {
      if (performance.now() - lastBeat >= timing.heartbeatMs) beatNow();
    },
    release,
  };
}

type Verdict = "alive" | "stale" | "unknown";

function judge(holder: LockContent): Verdict {
  // A lock of an earlier version, or one written in our own pid namespace: its pid is meaningful here.
  if (holder.owner === null || (holder.namespace !== null && holder.namespace === ourNamespace())) {
    return isAlive(holder) ? "alive" : "stale";
  }
  // From elsewhere: only watching it tells.
  return "unknown";
}

/**
 * Watches a lock from elsewhere until its holder beats ("alive": its modification time moved), it
 * stays unchanged for `staleMs` by our own monotonic clock ("stale"), or the file is replaced or
 * removed ("changed": decide again). The file's times are only compared with each other, never with
 * our clock.
 */
async function watch(path: string, seen: SeenLock, timing: LockTiming): Promise<Verdict | "changed"> {
  const pollMs = Math.max(10, Math.min(250, timing.heartbeatMs / 4));
  const since = performance.now();
  for (;;) {
    await sleep(pollMs);
    const now = readLock(path);
    if (now === null || now.raw !== seen.raw) return "changed";
    if (now.mtimeMs !== seen.mtimeMs) return "alive";
    if (performance.now() - since >= timing.staleMs) return "stale";
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
 * Removes the stale lock judged (`stale`), so the next attempt can create ours. Only the process that
 * created the takeover guard (a second file, created the same atomic way) may move a lock, and it
 * moves only a file that still is the lock it judged: so a lock created after the stale one was
 * judged is never moved, and of several processes taking one stale lock over at once exactly one gets
 * it (the first to create its own once the stale one is gone). Without the guard, one of them could
 * move aside the lock another had just created and, putting it back, find a third one's lock there:
 * two holders. A holder that beats at the last moment is put back. A guard left by a process that
 * died in the middle of a takeover is removed once it has stood still for `staleMs`.
 */
async function takeOverStale(
  path: string,
  stale: SeenLock,
  owner: string,
  timing: LockTiming,
): Promise<void> {
  const guard = `${path}.takeover`;
  if (!tryCreate(guard, owner, owner)) {
    // Another process is taking over (the next attempt finds its lock), or died doing it.
    const seenGuard = readLock(guard);
    if (seenGuard && (await watch(guard, seenGuard, timing)) === "stale") {
      const now = readLock(guard);
      if (now && now.raw === seenGuard.raw && now.mtimeMs === seenGuard.mtimeMs)
        rmSync(guard, { force: true });
    }
    return;
  }
  const aside = `${path}.${owner}.stale`;
  try {
    const current = readLock(path);
    if (current === null || current.raw !== stale.raw) return; // gone or replaced: the next attempt decides
    renameSync(path, aside);
    const moved = readLock(aside);
    // Touched since it was judged: its holder is alive after all, and keeps it.
    if (moved && moved.mtimeMs !== stale.mtimeMs) linkSync(aside, path);
  } catch {
    // A lock appeared meanwhile (only after ours was moved): the next attempt reads it.
  } finally {
    rmSync(aside, { force: true });
    rmSync(guard, { force: true });
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
