import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres, { type Sql } from "postgres";
import { type Database, openDatabase } from "../../src/db/connection.ts";
import { migrate } from "../../src/db/migrate.ts";
import { silentLogger } from "../../src/log.ts";

/** Which database the suite runs on: PostgreSQL (default) or the embedded one (TEST_DATABASE=embedded). */
export const TEST_DATABASE = process.env.TEST_DATABASE === "embedded" ? "embedded" : "postgres";
export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

export interface TestDatabase extends Database {
  /** postgres:// URL of this database (for a second process or a second pool). */
  url: string | null;
}

/**
 * A fresh, migrated database for one test file: a new PostgreSQL database named after a random
 * suffix (dropped at close), or a new embedded database in a temporary folder.
 */
export async function createTestDatabase(kind = TEST_DATABASE): Promise<TestDatabase> {
  if (kind === "embedded") {
    const dir = mkdtempSync(join(tmpdir(), "vs-test-"));
    const db = await openDatabase({ dataDir: dir, log: silentLogger });
    await migrate(db.sql);
    return {
      ...db,
      url: null,
      close: async () => {
        await db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const name = `vs_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } catch (err) {
    await admin.end();
    throw new Error(`PostgreSQL is required at ${PG_ADMIN_URL} for the tests: ${(err as Error).message}`);
  }
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
  const db = await openDatabase({ url, dataDir: "", log: silentLogger });
  await migrate(db.sql);
  return {
    ...db,
    url,
    close: async () => {
      await db.close();
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

export type { Sql };
