/**
 * The main thread's side of the embedded database's thread (pgliteWorker.ts): each call is one
 * message there and one answer back, in order. The database's work runs on that thread, so the HTTP
 * server, the timers and the DATA_DIR lock's heartbeat go on while a statement runs, and the second
 * core does the database's share.
 */

/** What the main thread asks (pgliteWorker.ts answers each with a `ThreadReply` of the same id). */
export type ThreadRequest =
  | {
      id: number;
      op: "open";
      dataDir: string;
      engine: WebAssembly.Module;
      fsBundle: Blob;
      /** Added to PGlite's own start parameters. */
      startParams: string[];
    }
  /** Whole frontend protocol messages; the answer is every backend message they produced. */
  | { id: number; op: "protocol"; bytes: Uint8Array }
  /** One statement of the simple protocol, its rows. */
  | { id: number; op: "query"; sql: string }
  /** The session as a new connection should find it: no transaction, no prepared statement. */
  | { id: number; op: "reset" }
  | { id: number; op: "close" };

export type ThreadReply =
  | { id: number; ok: true; bytes?: Uint8Array; rows?: Record<string, unknown>[] }
  | { id: number; ok: false; message: string };

type OpenRequest = Omit<Extract<ThreadRequest, { op: "open" }>, "id" | "op">;
/** A request before it is numbered (Omit over each member of the union). */
type Unnumbered<T> = T extends unknown ? Omit<T, "id"> : never;

export class PgliteThread {
  #worker: Worker;
  #nextId = 1;
  #pending = new Map<
    number,
    { resolve(reply: ThreadReply & { ok: true }): void; reject(err: Error): void }
  >();
  #failed: Error | null = null;
  #closing = false;
  /** Called once if the thread stops while the database is open (not by `close`). */
  #onLost: (err: Error) => void = () => {};

  /**
   * Listens to `worker` at once: an error or an exit before the first answer (a module that cannot
   * load, a thread that dies) must fail what waits on it, never leave it waiting.
   */
  private constructor(worker: Worker) {
    this.#worker = worker;
    this.#worker.onmessage = (e: MessageEvent<ThreadReply>) => {
      const reply = e.data;
      const waiting = this.#pending.get(reply.id);
      if (!waiting) return;
      this.#pending.delete(reply.id);
      if (reply.ok) waiting.resolve(reply);
      else waiting.reject(new Error(reply.message));
    };
    this.#worker.onerror = (e: ErrorEvent) => {
      e.preventDefault?.();
      this.#fail(new Error(`The embedded database's thread failed: ${e.message}`));
    };
    this.#worker.onmessageerror = () => {
      this.#fail(new Error("The embedded database's thread sent an answer that could not be read."));
    };
    // Bun tells when a worker's thread ends, whatever ended it.
    this.#worker.addEventListener("close", () => {
      this.#fail(new Error("The embedded database's thread stopped."));
    });
  }

  /**
   * Opens the database (a recovery after a crash included) in a new thread, `worker`, started by the
   * runtime's adapter (`PgliteFiles.thread`) on pgliteWorker.ts. Once open, a thread that stops
   * (anything but `close`) calls `onLost`: every statement after it would fail.
   */
  static async open(
    worker: Worker,
    request: OpenRequest,
    onLost: (err: Error) => void,
  ): Promise<PgliteThread> {
    const thread = new PgliteThread(worker);
    try {
      await thread.#send({ op: "open", ...request });
    } catch (err) {
      thread.#fail(err as Error);
      throw err;
    }
    if (thread.#failed) throw thread.#failed;
    thread.#onLost = onLost;
    return thread;
  }

  /** Runs whole protocol messages; resolves to the backend's answer bytes. */
  async protocol(bytes: Uint8Array): Promise<Uint8Array> {
    // A copy of its own, moved to the thread: the driver's buffers may be views into a shared pool.
    const own = new Uint8Array(bytes);
    const reply = await this.#send({ op: "protocol", bytes: own }, [own.buffer]);
    return reply.bytes ?? new Uint8Array(0);
  }

  async query<T>(sql: string): Promise<T[]> {
    return ((await this.#send({ op: "query", sql })).rows ?? []) as T[];
  }

  async reset(): Promise<void> {
    await this.#send({ op: "reset" });
  }

  /** Closes the database (a clean shutdown of PostgreSQL), then the thread. */
  async close(): Promise<void> {
    if (this.#failed) return;
    this.#closing = true;
    try {
      await this.#send({ op: "close" });
    } finally {
      this.#fail(new Error("The embedded database is closed."));
    }
  }

  #send(request: Unnumbered<ThreadRequest>, transfer: Transferable[] = []) {
    if (this.#failed) return Promise.reject(this.#failed);
    const id = this.#nextId++;
    return new Promise<ThreadReply & { ok: true }>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...request, id } as ThreadRequest, transfer);
    });
  }

  #fail(err: Error): void {
    if (this.#failed) return;
    this.#failed = err;
    this.#worker.terminate();
    for (const waiting of this.#pending.values()) waiting.reject(err);
    this.#pending.clear();
    if (!this.#closing) this.#onLost(err);
  }
}
