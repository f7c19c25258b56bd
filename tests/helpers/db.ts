import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres, { type Sql } from "postgres";
import pkg from "../../package.json" with { type: "json" };
import { type Database, openDatabase } from "../../src/db/engine/connection.ts";
import { migrate } from "../../src/db/engine/migrate.ts";
import { migrations } from "../../src/db/engine/migrations.ts";
import { silentLogger } from "../../src/log.ts";
import { bunPgliteFiles } from "../../src/runtime/bunFiles.ts";

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
    cpSync(await embeddedTemplate(), dir, { recursive: true });
    const db = await openDatabase({ dataDir: dir, log: silentLogger, pglite: bunPgliteFiles });
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
  // A missing PostgreSQL fails the test file with this message, in CI and elsewhere: never a skip.
  const admin = postgres(PG_ADMIN_URL, { max: 1, connect_timeout: 5, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } catch (err) {
    await admin.end({ timeout: 1 });
    throw new Error(
      `PostgreSQL is required at ${PG_ADMIN_URL} for the tests (set TEST_PG_URL, or TEST_DATABASE=embedded ` +
        `for the embedded database): ${(err as Error).message}`,
    );
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

let template: Promise<string> | undefined;

/**
 * Creating an embedded database runs initdb, which takes seconds; opening a copy of an existing one takes
 * a fraction of that. So every embedded test database starts as a copy of a migrated template, kept in
 * the temporary folder under a name derived from the migrations and the PGlite version: a change to
 * either builds a new one. Built under a private name and renamed into place, so parallel runs never see
 * half a template. A copy of the folder is a DATA_DIR a server process can start on at once.
 */
export function embeddedTemplate(): Promise<string> {
  template ??= (async () => {
    const hash = createHash("sha256").update(pkg.dependencies["@electric-sql/pglite"]);
    for (const m of migrations) hash.update(`\0${m.name}\0${m.sql}`);
    const final = join(tmpdir(), `${TEMPLATE_PREFIX}${hash.digest("hex").slice(0, 16)}`);
    if (existsSync(final)) {
      // Marks it in use, so that pruning by another run leaves it alone.
      utimesSync(final, new Date(), new Date());
      return final;
    }
    pruneTemplates();
    const build = mkdtempSync(join(tmpdir(), `${TEMPLATE_PREFIX}build-`));
    const db = await openDatabase({ dataDir: build, log: silentLogger, pglite: bunPgliteFiles });
    await migrate(db.sql);
    await db.close();
    try {
      renameSync(build, final);
    } catch {
      rmSync(build, { recursive: true, force: true }); // another run got there first
    }
    return final;
  })();
  return template;
}

const TEMPLATE_PREFIX = "vs-test-template-";

/** Templates of other migrations (and builds that died half-way) go once unused for an hour. */
function pruneTemplates() {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(TEMPLATE_PREFIX)) continue;
    const path = join(tmpdir(), name);
    try {
      if (Date.now() - statSync(path).mtimeMs > 3_600_000) rmSync(path, { recursive: true, force: true });
    } catch {
      // Removed meanwhile by another run.
    }
  }
}

export type { Sql };
