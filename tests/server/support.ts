/**
 * The HTTP-level suite: each file starts the service as its own process (`src/main.ts serve`, on Bun
 * or, with SERVER_RUNTIME=deno, on Deno), on a database of its own (PostgreSQL, or the embedded one
 * with TEST_DATABASE=embedded), and talks to it only over HTTP, as a client would. Organizations,
 * agents and keys are made through the admin API (ADMIN_TOKEN), so nothing reaches into the
 * database: the embedded one is owned by the server process.
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { MAIN, type ServiceProcess, spawnService, stopService } from "../db/serviceProcess.ts";
import { embeddedTemplate, PG_ADMIN_URL, TEST_DATABASE } from "../helpers/db.ts";

export const SERVER_RUNTIME: "bun" | "deno" = process.env.SERVER_RUNTIME === "deno" ? "deno" : "bun";
export { TEST_DATABASE };

const DENO = join(import.meta.dir, "..", "..", "node_modules", ".bin", "deno");

/** How the service is started on the runtime under test, as `npm start` / `npm run start:deno` do. */
export function serverCommand(): string[] {
  return SERVER_RUNTIME === "deno" ? [DENO, "run", "-A", MAIN] : [process.execPath, MAIN];
}

/** Environment every server of the suite gets: no update check or colours from Deno. */
const RUNTIME_ENV = { DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" };

/**
 * How long a server may take to say it listens (a database to create or copy, a runtime to load):
 * under the one test timeout, so a server that never starts fails with its output.
 */
const LISTEN_TIMEOUT_MS = 45_000;

/** fetch's options, a bearer key, a JSON body, and Bun's `decompress: false` to read encoded bodies as sent. */
export type FetchInit = RequestInit & { key?: string; json?: unknown; decompress?: boolean };

export interface Server {
  url: string;
  adminToken: string;
  database: "postgres" | "embedded";
  /** The embedded database's folder, or null on PostgreSQL. */
  dataDir: string | null;
  service: ServiceProcess;
  /** A request to the server; `key` is sent as a bearer, `json` as the JSON body. */
  fetch(path: string, init?: FetchInit): Promise<Response>;
  /** An admin API call (`/api/admin/v1…`): the parsed answer, or an exception with the error body. */
  admin<T = Record<string, unknown>>(method: string, path: string, json?: unknown): Promise<T>;
  /** Stops the process (SIGTERM) and removes its database; resolves with its exit code. */
  stop(): Promise<{ code: number; ms: number }>;
}

export interface StartOptions {
  env?: Record<string, string>;
  /** Start on an empty database (migrations and, on the embedded one, the data directory made from scratch). */
  fresh?: boolean;
}

/** A new database for one server: an empty PostgreSQL database, or a DATA_DIR (migrated unless `fresh`). */
async function serverDatabase(
  fresh: boolean,
): Promise<{ env: Record<string, string>; dataDir: string | null; drop(): Promise<void> }> {
  if (TEST_DATABASE === "embedded") {
    const dataDir = mkdtempSync(join(tmpdir(), "vs-server-"));
    if (!fresh) cpSync(await embeddedTemplate(), dataDir, { recursive: true });
    return {
      env: { DATA_DIR: dataDir },
      dataDir,
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const name = `vs_server_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = postgres(PG_ADMIN_URL, { max: 1, connect_timeout: 5, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  return {
    env: { DATABASE_URL: PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`) },
    dataDir: null,
    drop: async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

export async function startServer(opts: StartOptions = {}): Promise<Server> {
  const db = await serverDatabase(opts.fresh ?? false);
  const adminToken = `adm_${crypto.randomUUID().replaceAll("-", "")}`;
  const service = spawnService(["serve"], {
    command: serverCommand(),
    env: {
      ...RUNTIME_ENV,
      HOST: "127.0.0.1",
      PORT: "0",
      ADMIN_TOKEN: adminToken,
      SIMULATION_TIME_SCALE: "0.01",
      WEBHOOK_ALLOW_PRIVATE_URLS: "true",
      ...db.env,
      ...opts.env,
    },
  });
  let url: string;
  try {
    url = await service.listening(LISTEN_TIMEOUT_MS);
  } catch (err) {
    service.proc.kill("SIGKILL");
    await service.exited;
    await db.drop();
    throw err;
  }
  let stopped: Promise<{ code: number; ms: number }> | undefined;
  const server: Server = {
    url,
    adminToken,
    database: TEST_DATABASE,
    dataDir: db.dataDir,
    service,
    fetch: (path, init = {}) => {
      const { key, json, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (key) headers.set("authorization", `Bearer ${key}`);
      let body = rest.body;
      if (json !== undefined) {
        headers.set("content-type", "application/json");
        body = JSON.stringify(json);
      }
      return fetch(`${url}${path}`, { ...rest, headers, body });
    },
    admin: async <T>(method: string, path: string, json?: unknown) => {
      const body = method === "GET" ? undefined : (json ?? {});
      const res = await server.fetch(`/api/admin/v1${path}`, { method, key: adminToken, json: body });
      const text = await res.text();
      if (!res.ok) throw new Error(`admin ${method} ${path}: ${res.status} ${text}`);
      return JSON.parse(text) as T;
    },
    stop: () => {
      stopped ??= (async () => {
        const result =
          service.proc.exitCode === null ? await stopService(service) : { code: await service.exited, ms: 0 };
        await db.drop();
        return result;
      })();
      return stopped;
    },
  };
  return server;
}

export interface Seed {
  org: { id: string; name: string; paidPlan: boolean; planMinutes: number };
  agent: { id: string; name: string; active: boolean };
  liveKey: string;
  testKey: string;
  live: { id: string; key: string };
  test: { id: string; key: string };
  publishable: { id: string; key: string; agentId: string; allowedOrigins: string[] };
}

/** An organization with an agent and one key of each kind, made through the admin API. */
export async function seed(
  server: Server,
  opts: {
    paidPlan?: boolean;
    planMinutes?: number;
    agentActive?: boolean;
    origins?: string[];
    cap?: number;
  } = {},
): Promise<Seed> {
  const org = await server.admin<Seed["org"]>("POST", "/organizations", {
    name: "Acme",
    paidPlan: opts.paidPlan ?? true,
    planMinutes: opts.planMinutes ?? 1000,
  });
  const agent = await server.admin<Seed["agent"]>("POST", `/organizations/${org.id}/agents`, {
    name: "Reception",
    active: opts.agentActive ?? true,
  });
  const live = await server.admin<Seed["live"]>("POST", `/organizations/${org.id}/secret-keys`, {
    mode: "live",
    scopes: ["*"],
  });
  const test = await server.admin<Seed["test"]>("POST", `/organizations/${org.id}/secret-keys`, {
    mode: "test",
    scopes: ["*"],
  });
  const publishable = await server.admin<Seed["publishable"]>(
    "POST",
    `/organizations/${org.id}/publishable-keys`,
    {
      agentId: agent.id,
      allowedOrigins: opts.origins ?? ["https://shop.example.com"],
      monthlyMinuteCap: opts.cap ?? 100,
    },
  );
  return { org, agent, liveKey: live.key, testKey: test.key, live, test, publishable };
}

let addressCounter = 0;

/**
 * A loopback address no other request of this process has come from (127.42.x.y): the server counts
 * web calls per client address, so each test gets a budget of its own.
 */
export function freshAddress(): string {
  addressCounter++;
  return `127.42.${Math.floor(addressCounter / 250)}.${(addressCounter % 250) + 2}`;
}

/**
 * One request whose socket is bound to `from` (a loopback address): the server sees that address as
 * the peer, as it would a distinct client. fetch cannot choose its source address; node:http can.
 */
export function requestFrom(
  from: string,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Response> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method: init.method ?? "GET",
        headers: init.headers,
        localAddress: from,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            for (const value of Array.isArray(v) ? v : v === undefined ? [] : [v]) headers.append(k, value);
          }
          const status = res.statusCode ?? 0;
          const body = status === 204 || status === 304 ? null : Buffer.concat(chunks);
          resolve(new Response(body, { status, headers }));
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(init.body);
  });
}

/** The server's JSON log lines so far, parsed. */
export function logLines(server: Server): Record<string, unknown>[] {
  const text = server.service.stdout();
  // Complete lines only: the last one may still be being written.
  return text
    .slice(0, text.lastIndexOf("\n") + 1)
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
