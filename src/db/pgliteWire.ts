import { EventEmitter } from "node:events";
import type { PGlite } from "@electric-sql/pglite";

/**
 * The driver's connection to the embedded database, inside the process: postgres.js's `socket`
 * option takes any object with the few socket methods it uses, and this one hands the driver's bytes
 * straight to PGlite's wire-protocol entry point and its answers back as `data` events.
 *
 * Why not a socket: a Unix socket in front of PGlite cost, per statement, a system call and an event
 * loop wake-up on each side of each direction, and PGlite ran each protocol message (Bind, Execute,
 * Sync …) as a call of its own. Here every complete message the driver has written by the time the
 * queue is drained goes to PGlite in one call, and nothing outside the process can reach the database:
 * there is no socket or port at all.
 *
 * One wire per PGlite: it is a single session, the driver gets exactly one connection.
 */
export class PgliteWire extends EventEmitter {
  /** Read by postgres.js before it sends its Terminate message. */
  readyState: "open" | "closed" = "open";
  #db: PGlite;
  /** Bytes written by the driver and not yet given to PGlite (whole messages plus, rarely, a partial one). */
  #input: Buffer[] = [];
  #inputLength = 0;
  #draining = false;
  /** The startup message has no type byte and must reach PGlite alone. */
  #started = false;
  #onData = (bytes: Uint8Array) => {
    // A view into PGlite's memory, reused by the next call: copy it out.
    if (bytes.length > 0 && this.readyState === "open") this.#output.push(Buffer.from(bytes));
  };
  #output: Buffer[] = [];

  constructor(db: PGlite) {
    super();
    this.#db = db;
  }

  write(chunk: Uint8Array, callback?: (err?: Error | null) => void): boolean {
    if (this.readyState !== "open") {
      callback?.(new Error("The embedded database connection is closed."));
      return false;
    }
    this.#input.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.#inputLength += chunk.byteLength;
    if (!this.#draining) {
      this.#draining = true;
      // Later in this turn of the event loop, so statements written together go to PGlite together,
      // and never re-entrantly inside the driver's own write.
      queueMicrotask(() => void this.#drain());
    }
    if (callback) queueMicrotask(() => callback(null));
    return true;
  }

  end(chunk?: Uint8Array): void {
    // The driver's last words are a Terminate message, which a single session has no use for.
    void chunk;
    this.destroy();
  }

  destroy(): void {
    if (this.readyState === "closed") return;
    this.readyState = "closed";
    this.#input = [];
    // The session outlives the connection: a transaction left open would hold the next connection's
    // statements (the driver only closes idle connections, so this is for the unexpected).
    const rollback = this.#db.isInTransaction() ? this.#db.exec("rollback") : Promise.resolve();
    void rollback.catch(() => {}).then(() => this.emit("close", false));
  }

  /** Gives PGlite every complete message written so far, one call per batch, until none is left. */
  async #drain(): Promise<void> {
    try {
      while (this.readyState === "open") {
        const batch = this.#takeCompleteMessages();
        if (!batch) break;
        // Runs synchronously to the end of the batch (no file-system sync: the data directory is a
        // plain Node file system mount, whose sync is a no-op), then answers in one `data` event.
        await this.#db.execProtocolRawStream(batch, { syncToFs: false, onRawData: this.#onData });
        if (this.#output.length > 0) {
          const answer = this.#output.length === 1 ? this.#output[0]! : Buffer.concat(this.#output);
          this.#output = [];
          this.emit("data", answer);
        }
      }
    } catch (err) {
      // PGlite itself failed (a SQL error comes back as an ErrorResponse instead): the session is
      // unusable. The driver sees an error and a closed connection.
      this.readyState = "closed";
      this.#input = [];
      this.#output = [];
      queueMicrotask(() => {
        this.emit("error", err);
        this.emit("close", true);
      });
    } finally {
      this.#draining = false;
    }
  }

  /**
   * Removes from the input and returns the longest prefix of whole messages (the startup message
   * alone), or null when not even one whole message has arrived.
   */
  #takeCompleteMessages(): Uint8Array | null {
    if (this.#inputLength === 0) return null;
    const all = this.#input.length === 1 ? this.#input[0]! : Buffer.concat(this.#input, this.#inputLength);
    let end = 0;
    if (!this.#started) {
      // Startup: Int32 length (itself included), then the protocol version and parameters.
      if (all.length < 4 || all.length < all.readInt32BE(0)) return this.#keep(all, 0);
      end = all.readInt32BE(0);
      this.#started = true;
    } else {
      // Every later message: a type byte, then an Int32 length that counts itself but not the type.
      while (end + 5 <= all.length) {
        const next = end + 1 + all.readInt32BE(end + 1);
        if (next > all.length) break;
        end = next;
      }
      if (end === 0) return this.#keep(all, 0);
    }
    this.#keep(all, end);
    return all.subarray(0, end);
  }

  #keep(all: Buffer, from: number): null {
    const rest = all.subarray(from);
    this.#input = rest.length > 0 ? [rest] : [];
    this.#inputLength = rest.length;
    return null;
  }
}
