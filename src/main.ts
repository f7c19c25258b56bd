import process from "node:process";
import { createApp } from "./app.ts";
import { type AdminResult, adminFailure, executeAdmin, parseAdmin } from "./cli/admin.ts";
import { asksForHelp, USAGE, unknownCommand } from "./cli/usage.ts";
import { composeDeps, evictOnChanges } from "./compose.ts";
import { type Database, openDatabase } from "./db/engine/connection.ts";
import { migrate } from "./db/engine/migrate.ts";
import type { Deps } from "./deps.ts";
import { type Env, livekitMissing, parseEnv } from "./env.ts";
import { parseCidrs } from "./http/clientAddress.ts";
import { createLogger, silentLogger } from "./log.ts";
import { currentRuntime } from "./runtime/current.ts";
import type { RunningServer } from "./runtime/runtime.ts";
import { httpUrl, prepareDemo, reachableUrl } from "./services/demo.ts";
import { drainDials } from "./services/dialing.ts";
import { scheduleHousekeeping } from "./services/housekeeping.ts";
import { WebhookSender } from "./services/webhookSender.ts";
import { registerTimerHandlers } from "./timerHandlers.ts";
import { TimerRunner } from "./timers/runner.ts";
import { VERSION } from "./version.ts";
import { preloadWidget } from "./widget/assets.ts";

/**
 * Firing transactions in flight at once. Two keep the batches large enough to be cheap under a burst
 * (a firing that waits for a slot takes everything that came due meanwhile); the timers' pool has one
 * more connection, for the polling, and the liveness lock has a connection of its own
 * (timers/liveness.ts): four in all, as before the lock had its own.
 */
const TIMER_CONCURRENCY = 2;

/** Process wiring: env → database → migrate → timers → serve → shutdown in reverse order on SIGTERM. */
async function main(argv: string[]) {
  const command = argv[0] ?? "serve";
  // What needs no environment comes first: the version, the help, the admin command's own usage.
  if (command === "--version" || command === "version") {
    await write(process.stdout, `${VERSION}\n`);
    return;
  }
  if (asksForHelp(command)) {
    await write(process.stdout, USAGE);
    return;
  }
  if (command === "admin") {
    // stdout carries the JSON answer only: no log line, not even from the database or migrations.
    const result = await runAdminCommand(argv.slice(1));
    await write(process.stdout, result.stdout);
    await write(process.stderr, result.stderr);
    process.exit(result.code);
  }
  if (command !== "serve" && command !== "migrate") {
    await write(process.stderr, unknownCommand(command));
    process.exit(2);
  }

  const env = readEnv();
  const log = createLogger(env.LOG_LEVEL);
  const runtime = await currentRuntime();
  const open = (logger = log, max?: number) =>
    openDatabase({ url: env.DATABASE_URL, dataDir: env.DATA_DIR, log: logger, max, pglite: runtime.pglite });

  if (command === "migrate") {
    const db = await open();
    const applied = await migrate(db.sql, log);
    console.log(JSON.stringify({ applied }));
    await db.close();
    return;
  }

  const livekitGaps = livekitMissing(env);
  if (livekitGaps.length > 0) {
    // Names only: the values set may be secrets.
    log.warn(
      "LiveKit is partly configured, so it counts as unset: live web calls answer agent_unavailable, live phone calls carrier_unavailable",
      { missing: livekitGaps },
    );
  }
  if (!env.RECAPTCHA_SECRET) {
    log.warn("RECAPTCHA_SECRET is not set: web calls with a publishable key are refused (invalid_captcha)");
  }
  // Signals are handled from the very start, so a SIGTERM during start-up also stops cleanly.
  let stopping = false;
  let server: RunningServer | null = null;
  let db: Database | null = null;
  let timerDb: Database | null = null;
  let placementDb: Database | null = null;
  let timers: TimerRunner | null = null;
  let webhooks: WebhookSender | null = null;
  let deps: Deps | null = null;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    const force = setTimeout(() => process.exit(1), 9_000);
    await server?.stop();
    await timers?.stop();
    // Webhook requests and phone calls' dials under way get a few seconds to finish and have their
    // outcome recorded; a webhook still running after that is sent again later by its safety-net
    // timer, and a dial is resolved from LiveKit's room by its own.
    const [sent, dialled] = await Promise.all([
      webhooks ? webhooks.drain(5_000) : true,
      deps ? drainDials(deps, 5_000) : true,
    ]);
    if (!sent) log.warn("webhook requests still under way at shutdown");
    if (!dialled) log.warn("phone calls still being dialled at shutdown; their safety nets resolve them");
    await timerDb?.close();
    await placementDb?.close();
    await db?.close();
    clearTimeout(force);
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));

  db = await open();
  await migrate(db.sql, log);
  // Timers get connections of their own, so a burst of API requests cannot hold them back
  // (PostgreSQL only: the embedded database is a single session).
  timerDb = db.kind === "postgres" ? await open(log, TIMER_CONCURRENCY + 1) : null;
  // The live placements' one batch at a time gets a connection of its own (compose.ts).
  placementDb = db.kind === "postgres" ? await open(log, 1) : null;
  timers = new TimerRunner({
    sql: (timerDb ?? db).sql,
    log,
    liveness: db.kind === "embedded" ? "shared" : "own",
    concurrency: TIMER_CONCURRENCY,
  });
  deps = composeDeps({
    sql: db.sql,
    env,
    log,
    timers,
    ...(placementDb ? { placementSql: placementDb.sql } : {}),
  });
  // Other processes on the same PostgreSQL may revoke keys: hear it, so cached keys are evicted.
  if (db.kind === "postgres") await evictOnChanges(db.sql, deps);
  const demoBanner = await prepareDemo(deps, { dataDir: env.DATA_DIR, database: db.kind });
  webhooks = new WebhookSender(deps);
  registerTimerHandlers(timers, deps, webhooks);
  await scheduleHousekeeping(deps);
  await timers.start();
  const app = createApp(deps);
  server = runtime.serve(app.fetch, { port: env.PORT, hostname: env.HOST });
  // Written whatever LOG_LEVEL says: with PORT=0 this line is the only way to learn the port.
  createLogger("info").info("listening", {
    url: httpUrl(env.HOST, server.port),
    database: db.kind,
    version: VERSION,
    runtime: runtime.name,
  });
  // Prepared once listening, so it does not compete with start-up; a request arriving first waits for it.
  preloadWidget(log);
  // For a person, once: on stderr, apart from the JSON log stream on stdout.
  if (demoBanner) process.stderr.write(demoBanner(reachableUrl(env.HOST, server.port)));
}

/**
 * The environment, refused as a whole before anything is opened. TRUST_PROXY's entries are parsed
 * here by the parser that uses them (http/clientAddress.ts; env.ts may not import it), so a bad entry
 * stops the process before the database is touched rather than in createApp.
 */
function readEnv(): Env {
  const env = parseEnv(process.env);
  try {
    parseCidrs(env.TRUST_PROXY);
  } catch (err) {
    throw new Error(`invalid environment: ${(err as Error).message}`);
  }
  return env;
}

/** `voice-service admin …`: a usage error or the help needs no environment nor database. */
async function runAdminCommand(args: string[]): Promise<AdminResult> {
  const parsed = parseAdmin(args);
  if ("code" in parsed) return parsed;
  let env: Env;
  try {
    env = readEnv();
  } catch (err) {
    return adminFailure("internal_error", (err as Error).message);
  }
  const runtime = await currentRuntime();
  try {
    const db = await openDatabase({
      url: env.DATABASE_URL,
      dataDir: env.DATA_DIR,
      log: silentLogger,
      pglite: runtime.pglite,
    });
    try {
      await migrate(db.sql);
      return await executeAdmin(parsed, composeDeps({ sql: db.sql, env, log: silentLogger }));
    } finally {
      await db.close();
    }
  } catch (err) {
    return adminFailure("internal_error", `Database unavailable: ${(err as Error).message}`);
  }
}

/** Writes everything before the process exits (a pipe may otherwise lose the end of the output). */
function write(stream: NodeJS.WriteStream, text: string): Promise<void> {
  return new Promise((resolve) => (text ? stream.write(text, () => resolve()) : resolve()));
}

main(process.argv.slice(2)).catch(async (err) => {
  // A log line like any other (logs are JSON lines on stdout), written whatever LOG_LEVEL says,
  // or whether it could be read at all.
  let line = "";
  createLogger("error", (text) => {
    line = text;
  }).error("fatal", { error: err instanceof Error ? err.message : String(err) });
  await write(process.stdout, `${line}\n`);
  process.exit(1);
});
