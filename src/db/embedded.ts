import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import type { Logger } from "../log.ts";

export interface Embedded {
  /** postgres:// URL of the private loopback socket in front of PGlite. */
  url: string;
  close(): Promise<void>;
}

/**
 * Opens the embedded PostgreSQL (PGlite) persisted in dataDir and exposes it on a private loopback
 * port so the same postgres.js code talks to it.
 */
export async function openEmbedded(dataDir: string, log: Logger): Promise<Embedded> {
  mkdirSync(dataDir, { recursive: true });
  const db = await PGlite.create({ dataDir });
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 1 });
  await server.start();
  const conn = server.getServerConn();
  log.debug("embedded database ready", { dataDir });
  return {
    url: `postgres://postgres@${conn}/postgres`,
    close: async () => {
      await server.stop();
      await db.close();
    },
  };
}
