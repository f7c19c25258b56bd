import { Buffer } from "node:buffer";
import { EventEmitter } from "node:events";
import type { PgliteThread } from "./pgliteThread.ts";

/** The one PGlite session, on its thread, and the wire that owns it now (made once per database by openEmbedded). */
export interface PgliteSession {
  readonly db: PgliteThread;
  owner: PgliteWire | null;
}

/**
 * The driver's connection to the embedded database, inside the process: postgres.js's `socket`
 * option takes any object with the few socket methods it uses, and this one hands the driver's bytes
 * to PGlite's wire-protocol entry point, on the database's own thread (pgliteThread.ts), and its
 * answers back as `data` events.
 *
 * Why not a socket: a Unix socket in front of PGlite cost, per statement, a system call and an event
 * loop wake-up on each side of each direction, and PGlite ran each protocol message (Bind, Execute,
 * Sync …) as a call of its own. Here every complete message the driver has written by the time the
 * queue is drained goes to PGlite in one call, and nothing outside the process can reach the database:
 * there is no socket or port at all.
 *
 * PGlite is one session, so one wire at a time owns it (from its startup message to its close); a
 * second startup meanwhile is refused rather than interleaved with the first. When the owner closes,
 * the session is reset for the next one: an open transaction rolled back, the prepared statements
 * (named per connection by the driver) dropped. Session-level advisory locks are kept on purpose:
 * the timer runner's liveness lock must survive a reconnect.
 */
export class PgliteWire extends EventEmitter {
  /** Read by postgres.js before it sends its Terminate message. */
  readyState: "open" | "closed" = "open";
  #session: PgliteSession;
  /** Bytes written by the driver and not yet given to PGlite (whole messages plus, rarely, a partial one). */
  #input: Buffer[] = [];
  #inputLength = 0;
  #draining = false;
  /** The startup message has no type byte and must reach PGlite alone. */
  #started = false;
  /** Resolves once this wire no longer owns the session (after its close has reset it). */
  #released: Promise<void> = Promise.resolve();

  /** Called right before and right after PGlite runs each batch (the DATA_DIR lock's check). */
  #aroundBatch: () => void;

  constructor(session: PgliteSession, aroundBatch: () => void) {
    super();
    this.#session = session;
    this.#aroundBatch = aroundBatch;
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
    this.#close();
  }

  destroy(): void {
    this.#close();
  }

  /**
   * Closes once: resets the session if this wire owned it, then tells the driver (`error` only if it
   * still listens: an `error` event nobody listens to would throw).
   */
  #close(err?: unknown): void {
    if (this.readyState === "closed") return;
    this.readyState = "closed";
    this.#input = [];
    const owned = this.#session.owner === this;
    this.#released = (owned ? this.#resetSession() : Promise.resolve()).then(() => {
      if (owned) this.#session.owner = null;
    });
    void this.#released.then(() => {
      if (err !== undefined && this.listenerCount("error") > 0) this.emit("error", err);
      this.emit("close", err !== undefined);
    });
  }

  async #resetSession(): Promise<void> {
    try {
      await this.#session.db.reset();
    } catch {
      // PGlite closed or failed: there is no session left to reset.
    }
  }

  /** Gives PGlite every complete message written so far, one call per batch, until none is left. */
  async #drain(): Promise<void> {
    try {
      // A new connection's startup waits for the previous owner's reset if that is still running
      // (the driver may start its next connection before our close event, e.g. after `sql.end()`).
      const owner = this.#session.owner;
      if (!this.#started && owner && owner !== this && owner.readyState === "closed") await owner.#released;
      while (this.readyState === "open") {
        const batch = this.#takeCompleteMessages();
        if (!batch) break;
        // PGlite runs the batch to its end on its thread and answers in one `data` event. The lock is
        // checked on both sides of it, so no batch starts on a DATA_DIR another process took over.
        this.#aroundBatch();
        const answer = await this.#session.db.protocol(batch);
        this.#aroundBatch();
        if (answer.length > 0 && this.readyState === "open") {
          this.emit("data", Buffer.from(answer.buffer, answer.byteOffset, answer.byteLength));
        }
      }
    } catch (err) {
      // A malformed message, a second session, or PGlite itself failing (a SQL error comes back as an
      // ErrorResponse instead): the driver sees an error and a closed connection.
      this.#close(err);
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
      // Startup: Int32 length (itself included), Int32 protocol version or request code, parameters.
      if (all.length < 8 || all.length < all.readInt32BE(0)) return this.#keep(all, 0);
      end = all.readInt32BE(0);
      this.#claimSession(all.readInt32BE(4));
      this.#started = true;
    } else {
      // Every later message: a type byte, then an Int32 length that counts itself but not the type.
      while (end + 5 <= all.length) {
        const length = all.readInt32BE(end + 1);
        if (length < 4) throw new Error(`Malformed message to the embedded database (length ${length}).`);
        if (end + 1 + length > all.length) break;
        end += 1 + length;
      }
      if (end === 0) return this.#keep(all, 0);
    }
    this.#keep(all, end);
    return all.subarray(0, end);
  }

  /** Takes the session for a startup message; refuses cancel/SSL/GSS requests and a second session. */
  #claimSession(code: number): void {
    if (code !== PROTOCOL_3_0) {
      // 80877102 cancel, 80877103 SSL, 80877104 GSS encryption: none applies to an in-process session.
      throw new Error(`The embedded database does not take request ${code} (only protocol 3.0).`);
    }
    const owner = this.#session.owner;
    if (owner && owner !== this) {
      throw new Error("The embedded database is one session: it takes one connection at a time.");
    }
    this.#session.owner = this;
  }

  #keep(all: Buffer, from: number): null {
    const rest = all.subarray(from);
    this.#input = rest.length > 0 ? [rest] : [];
    this.#inputLength = rest.length;
    return null;
  }
}

const PROTOCOL_3_0 = 196608;
