/**
 * Authenticated GET /api/v1/agents at 32 concurrent connections, PostgreSQL and embedded.
 * Run: npm run bench:agents   (BENCH_SECONDS=10 by default)
 */

import { rmSync } from "node:fs";
import type postgres from "postgres";
import { composeDeps } from "../../src/compose.ts";
import { openDatabase } from "../../src/db/engine/connection.ts";
import { migrate } from "../../src/db/engine/migrate.ts";
import { parseEnv } from "../../src/env.ts";
import { silentLogger } from "../../src/log.ts";
import { bunPgliteFiles } from "../../src/runtime/bunFiles.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { freshPostgres, load, machine, rssMiB, startServer, tempDataDir } from "./lib.ts";

const seconds = Number(process.env.BENCH_SECONDS ?? 10);

async function seed(sql: postgres.Sql): Promise<string> {
  const c = composeDeps({ sql, env: parseEnv({}), log: silentLogger });
  const org = await createOrganization(c, { name: "Bench", paidPlan: true, planMinutes: 1000 });
  for (let i = 0; i < 5; i++) await createAgent(c, org.id, { name: `Agent ${i}` });
  return (await createSecretKey(c, org.id, { mode: "live", scopes: ["*"] })).key;
}

async function run(label: string, env: Record<string, string>, key: string) {
  const server = await startServer(env);
  try {
    const idle = await rssMiB(server.pid);
    const headers = { authorization: `Bearer ${key}` };
    await load({ url: `${server.url}/api/v1/agents`, connections: 32, seconds: 2, headers }); // warm-up
    const r = await load({ url: `${server.url}/api/v1/agents`, connections: 32, seconds, headers });
    const loaded = await rssMiB(server.pid);
    console.log(
      `| ${label} | ${r.requestsPerSecond} | ${r.p50} | ${r.p99} | ${r.non2xx} | ${idle} | ${loaded} |`,
    );
  } finally {
    await server.stop();
  }
}

console.log(`GET /api/v1/agents, 32 connections, ${seconds} s, ${machine()}`);
console.log("| database | req/s | p50 ms | p99 ms | non-2xx | idle RSS MiB | RSS after MiB |");
console.log("|---|---|---|---|---|---|---|");

const pg = await freshPostgres();
try {
  const db = await openDatabase({ url: pg.url, dataDir: "", log: silentLogger });
  await migrate(db.sql);
  const key = await seed(db.sql);
  await db.close();
  await run("PostgreSQL", { DATABASE_URL: pg.url }, key);
} finally {
  await pg.drop();
}

const dir = tempDataDir();
try {
  const db = await openDatabase({ dataDir: dir, log: silentLogger, pglite: bunPgliteFiles });
  await migrate(db.sql);
  const key = await seed(db.sql);
  await db.close();
  await run("embedded", { DATA_DIR: dir }, key);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
