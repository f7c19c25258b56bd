import type { Db } from "./engine/connection.ts";

/**
 * Random 256-bit secrets generated once per database and shared by every process using it (the
 * server_secrets table): the first process to ask for a name creates it, the others read the same
 * row. Each is read once per process and kept.
 */
export class ServerSecrets {
  readonly #sql: Db;
  readonly #byName = new Map<string, Promise<Uint8Array>>();

  constructor(sql: Db) {
    this.#sql = sql;
  }

  get(name: string): Promise<Uint8Array> {
    let pending = this.#byName.get(name);
    if (!pending) {
      pending = this.#read(name);
      // A failure is not remembered: the next request tries again.
      pending.catch(() => this.#byName.delete(name));
      this.#byName.set(name, pending);
    }
    return pending;
  }

  async #read(name: string): Promise<Uint8Array> {
    const sql = this.#sql;
    const fresh = crypto.getRandomValues(new Uint8Array(32));
    await sql`insert into server_secrets (name, secret) values (${name}, ${fresh}) on conflict (name) do nothing`;
    const [row] = await sql<{ secret: Uint8Array }[]>`select secret from server_secrets where name = ${name}`;
    return new Uint8Array(row!.secret);
  }
}
