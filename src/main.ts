import { createApp } from "./app.ts";
import { systemClock } from "./clock.ts";
import { openDatabase } from "./db/connection.ts";
import { migrate } from "./db/migrate.ts";
import { parseEnv } from "./env.ts";
import { createLogger } from "./log.ts";
import { serve } from "./runtime/bun.ts";
import { registerTimerHandlers } from "./timers/handlers.ts";
import { TimerRunner } from "./timers/runner.ts";
import { VERSION } from "./version.ts";

/** Process wiring: env → database → migrate → timers → serve → shutdown in reverse order on SIGTERM. */
async function main(argv: string[]) {
  const command = argv[0] ?? "serve";
  if (command === "--version" || command === "version") {
    console.log(VERSION);
    return;
  }
  const env = parseEnv(process.env);
  const log = createLogger(env.LOG_LEVEL);

  if (command === "migrate") {
    const db = await openDatabase({ url: env.DATABASE_URL, dataDir: env.DATA_DIR, log });
    const applied = await migrate(db.sql, log);
    console.log(JSON.stringify({ applied }));
    await db.close();
    return;
  }
  if (command !== "serve") {
    console.error(
      `unknown command: ${command}\nusage: voice-service [serve | migrate | admin <command> | --version]`,
    );
    process.exit(2);
  }

  const db = await openDatabase({ url: env.DATABASE_URL, dataDir: env.DATA_DIR, log });
  await migrate(db.sql, log);
  // Timers get connections of their own, so a burst of API requests cannot hold them back
  // (PostgreSQL only: the embedded database is a single session).
  const timerDb =
    db.kind === "postgres"
      ? await openDatabase({ url: env.DATABASE_URL, dataDir: env.DATA_DIR, log, max: 6 })
      : null;
  const timers = new TimerRunner({
    sql: (timerDb ?? db).sql,
    log,
    liveness: db.kind === "embedded" ? "shared" : "reserved",
  });
  const deps = { sql: db.sql, clock: systemClock, log, env, timers };
  registerTimerHandlers(timers, deps);
  await timers.start();
  const app = createApp(deps);
  const server = serve(app.fetch, { port: env.PORT, hostname: env.HOST });
  log.info("listening", { url: `http://${env.HOST}:${server.port}`, database: db.kind, version: VERSION });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    const force = setTimeout(() => process.exit(1), 9_000);
    await server.stop();
    await timers.stop();
    await timerDb?.close();
    await db.close();
    clearTimeout(force);
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

main(process.argv.slice(2)).catch((err) => {
  console.error(JSON.stringify({ level: "error", msg: "fatal", error: (err as Error).message }));
  process.exit(1);
});
