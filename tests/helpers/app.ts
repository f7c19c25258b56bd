import { createApp } from "../../src/app.ts";
import { type Clock, systemClock } from "../../src/clock.ts";
import { composeDeps } from "../../src/compose.ts";
import type { Deps } from "../../src/deps.ts";
import { type Env, parseEnv } from "../../src/env.ts";
import { createLogger, type Logger, silentLogger } from "../../src/log.ts";
import { createAgent } from "../../src/services/agents.ts";
import { drainDials } from "../../src/services/dialing.ts";
import { createPublishableKey, createSecretKey } from "../../src/services/keys.ts";
import { createKnowledgeBase } from "../../src/services/knowledgeBases.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { registerTimerHandlers } from "../../src/timerHandlers.ts";
import { type RunnerOptions, TimerRunner } from "../../src/timers/runner.ts";
import { createTestDatabase, type TestDatabase } from "./db.ts";

export interface TestContext {
  db: TestDatabase;
  deps: Deps;
  app: ReturnType<typeof createApp>;
  /** The timer runner, when the context was created with `timers: true`. */
  runner: TimerRunner | null;
  /** Every log line the app wrote, for tests that search logs for secrets. */
  logs: string[];
  /** Calls the app like a client would, with JSON helpers. */
  request(
    path: string,
    init?: RequestInit & { json?: unknown; key?: string; remoteAddress?: string },
  ): Promise<Response>;
  close(): Promise<void>;
}

export async function createTestContext(
  opts: {
    env?: Record<string, string>;
    clock?: Clock;
    log?: Logger;
    /** Start a timer runner (simulated calls play out), optionally tuned. */
    timers?: boolean | Partial<RunnerOptions>;
  } = {},
): Promise<TestContext> {
  const db = await createTestDatabase();
  const logs: string[] = [];
  const log = opts.log ?? createLogger("debug", (line) => logs.push(line));
  const env: Env = parseEnv({ SIMULATION_TIME_SCALE: "0.01", ...opts.env });
  let runner: TimerRunner | null = null;
  if (opts.timers) {
    runner = new TimerRunner({
      sql: db.sql,
      log,
      liveness: db.kind === "embedded" ? "shared" : "own",
      pollIntervalMs: 50,
      horizonMs: 500,
      ...(opts.timers === true ? {} : opts.timers),
    });
  }
  const deps: Deps = composeDeps({
    sql: db.sql,
    env,
    log,
    clock: opts.clock ?? systemClock,
    ...(runner ? { timers: runner } : {}),
  });
  if (runner) {
    registerTimerHandlers(runner, deps);
    await runner.start();
  }
  const app = createApp(deps);
  return {
    db,
    deps,
    app,
    runner,
    logs,
    request: (path, init = {}) => {
      const { json, key, remoteAddress, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (key) headers.set("authorization", `Bearer ${key}`);
      let body = rest.body;
      if (json !== undefined) {
        headers.set("content-type", "application/json");
        body = JSON.stringify(json);
      }
      return Promise.resolve(
        app.fetch(new Request(`http://localhost${path}`, { ...rest, headers, body }), {
          remoteAddress: remoteAddress ?? "127.0.0.1",
        }),
      );
    },
    close: async () => {
      await runner?.stop();
      // As the server's shutdown does: a dial under way writes its outcome before the database goes.
      await drainDials(deps, 5_000);
      await db.close();
    },
  };
}

/** An organization with an agent and one key of each kind: the usual starting point of a test. */
export async function seedOrganization(
  ctx: Pick<TestContext, "deps">,
  opts: {
    paidPlan?: boolean;
    planMinutes?: number;
    agentActive?: boolean;
    origins?: string[];
    cap?: number;
  } = {},
) {
  const c = ctx.deps;
  const org = await createOrganization(c, {
    name: "Acme",
    paidPlan: opts.paidPlan ?? true,
    planMinutes: opts.planMinutes ?? 1000,
  });
  const agent = await createAgent(c, org.id, { name: "Reception", active: opts.agentActive ?? true });
  const live = await createSecretKey(c, org.id, { mode: "live", scopes: ["*"] });
  const test = await createSecretKey(c, org.id, { mode: "test", scopes: ["*"] });
  const publishable = await createPublishableKey(c, org.id, {
    agentId: agent.id,
    allowedOrigins: opts.origins ?? ["https://shop.example.com"],
    monthlyMinuteCap: opts.cap ?? 100,
  });
  const kb = await createKnowledgeBase(c, org.id, { name: "FAQ" });
  return { org, agent, liveKey: live.key, testKey: test.key, live, test, publishable, kb };
}

/** Dependencies over a database of the test's own, for seeding without an app (no runner). */
export function depsFor(sql: Deps["sql"]): Deps {
  return composeDeps({ sql, env: parseEnv({}), log: silentLogger });
}
