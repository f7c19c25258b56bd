import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import type { SecretKeyAuth } from "../auth/access.ts";
import { type Db, pipelinedTransaction } from "../db/engine/connection.ts";
import { noOrganizationExists } from "../db/organizations.ts";
import { findMintingTestKey } from "../db/secretKeys.ts";
import { lockForTransaction, readSetting, writeSetting } from "../db/settings.ts";
import type { Deps } from "../deps.ts";
import { createAgent } from "./agents.ts";
import { createSecretKey } from "./keys.ts";
import { createOrganization } from "./organizations.ts";

/**
 * The demo seed: on the first start with an empty database (no organization at all), a demo
 * organization, an active "Demo agent" and a test secret key with every scope, so that a fresh
 * install can be tried at once. Test mode only: no paid plan, nothing billed, nothing dialled.
 * Only where a demo belongs: the embedded database (a machine trying the service), or any database
 * when `DEMO=true`; never by default on a `DATABASE_URL` database, which is a deployment.
 */

/** An arbitrary constant: the advisory lock that makes seeding single across processes. */
const DEMO_LOCK = 72_410_005;
/** The settings key that remembers the demo organization and agent. */
const DEMO_SETTING = "demo";
export const DEMO_CREDENTIALS_FILE = "demo-credentials.json";

export interface DemoRef {
  organizationId: string;
  agentId: string;
}

export interface DemoSeed extends DemoRef {
  organizationName: string;
  agentName: string;
  secretKeyId: string;
  /** The test secret key: kept in the credentials file only, stored in the database as a hash. */
  testSecretKey: string;
  createdAt: string;
}

/**
 * Seeds the demo when the database has no organization (or, asked for with DEMO=true, when it has no
 * demo yet, whatever else it holds), and returns it; returns null otherwise. One transaction under an
 * advisory lock: two processes starting on one database create one demo, the second sees the first
 * one's and does nothing.
 */
export async function seedDemo(deps: Deps, opts: { askedFor?: boolean } = {}): Promise<DemoSeed | null> {
  return pipelinedTransaction(deps.sql, async (tx) => {
    await lockForTransaction(tx, DEMO_LOCK);
    const seeded = opts.askedFor ? (await findDemo(tx)) !== null : !(await noOrganizationExists(tx));
    if (seeded) return null;
    const t = { ...deps, sql: tx };
    const organization = await createOrganization(t, { name: "Demo organization" });
    const agent = await createAgent(t, organization.id, { name: "Demo agent", active: true });
    const key = await createSecretKey(t, organization.id, { mode: "test", scopes: ["*"] });
    const ref: DemoRef = { organizationId: organization.id, agentId: agent.id };
    await writeSetting(tx, DEMO_SETTING, ref);
    return {
      ...ref,
      organizationName: organization.name,
      agentName: agent.name,
      secretKeyId: key.id,
      testSecretKey: key.key,
      createdAt: key.createdAt,
    };
  });
}

/** The demo organization and agent, if this database was seeded with them (e.g. for a demo page). */
export async function findDemo(sql: Db): Promise<DemoRef | null> {
  const value = await readSetting<DemoRef>(sql, DEMO_SETTING);
  return value ? { organizationId: value.organizationId, agentId: value.agentId } : null;
}

/**
 * Keeps the demo credentials in `<dataDir>/demo-credentials.json`, readable by the owner only, since
 * the key cannot be read back from the database. Written to a fresh file then renamed, so the
 * secret never sits in a file with wider permissions. Returns the path.
 */
export function writeDemoCredentials(dataDir: string, demo: DemoSeed): string {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, DEMO_CREDENTIALS_FILE);
  const temporary = `${path}.${process.pid}.tmp`;
  const body = {
    organizationId: demo.organizationId,
    agentId: demo.agentId,
    secretKey: { id: demo.secretKeyId, key: demo.testSecretKey, mode: "test", scopes: ["*"] },
    createdAt: demo.createdAt,
  };
  rmSync(temporary, { force: true });
  writeFileSync(temporary, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600, flag: "wx" });
  chmodSync(temporary, 0o600);
  renameSync(temporary, path);
  return path;
}

/** The address a person on this machine can reach the server at (a wildcard host is not one). */
export function reachableUrl(host: string, port: number): string {
  return httpUrl(host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host, port);
}

/** The http URL of a host and port, an IPv6 address in brackets. */
export function httpUrl(host: string, port: number): string {
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/**
 * The short human-readable note printed once, on stderr, when the demo is created. It says where the
 * test key is, never the key itself: stderr is often kept in logs, the credentials file is readable
 * by its owner only.
 */
export function demoBanner(demo: DemoSeed, baseUrl: string, credentialsPath: string | null): string {
  const lines = [
    "",
    "Demo ready (test mode: everything is simulated, nothing is billed or dialled).",
    `  organization  ${demo.organizationId}  "${demo.organizationName}"`,
    `  agent         ${demo.agentId}  "${demo.agentName}"`,
    ...(credentialsPath
      ? [
          `  test key      ${demo.secretKeyId}, in ${credentialsPath} (readable only by you)`,
          "",
          "Try it:",
          `  KEY=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).secretKey.key' ${JSON.stringify(credentialsPath)})`,
          `  curl -H "Authorization: Bearer $KEY" ${baseUrl}/api/v1/agents`,
          "",
          "POST /api/v1/calls with this key creates a simulated call.",
        ]
      : [
          `  test key      ${demo.secretKeyId}: it could not be kept (see the log), and the database keeps`,
          "                only its hash. Create another with `voice-service admin create-secret-key`.",
        ]),
    "",
  ];
  return `${lines.join("\n")}\n`;
}

/** Whether this start may seed the demo: on the embedded database, or on any database with DEMO=true. */
export function demoBelongs(database: "postgres" | "embedded", env: Pick<Deps["env"], "DEMO">): boolean {
  return database === "embedded" || env.DEMO;
}

/**
 * The start-up step: seed if the demo belongs here and the database is empty (with DEMO=true: has no
 * demo yet), keep the credentials,
 * and return the banner to print once the server listens (null when nothing was seeded).
 */
export async function prepareDemo(
  deps: Deps,
  where: { dataDir: string; database: "postgres" | "embedded" },
): Promise<((baseUrl: string) => string) | null> {
  if (!demoBelongs(where.database, deps.env)) return null;
  const dataDir = where.dataDir;
  const demo = await seedDemo(deps, { askedFor: deps.env.DEMO });
  if (!demo) return null;
  let path: string | null = null;
  try {
    path = writeDemoCredentials(dataDir, demo);
  } catch (err) {
    deps.log.warn("could not write the demo credentials file", { dataDir, error: (err as Error).message });
  }
  deps.log.info("demo seeded", {
    organizationId: demo.organizationId,
    agentId: demo.agentId,
    secretKeyId: demo.secretKeyId,
    credentialsFile: path,
  });
  return (baseUrl) => demoBanner(demo, baseUrl, path);
}

/**
 * The demo's own test key stands behind the tokens the demo page mints: the oldest active test key of
 * the demo organization that may mint for the demo agent. None (all revoked, say): no demo.
 */
export async function demoKeyAuth(deps: Pick<Deps, "sql">, demo: DemoRef): Promise<SecretKeyAuth | null> {
  const row = await findMintingTestKey(deps.sql, demo.organizationId, demo.agentId);
  if (!row) return null;
  return {
    keyId: row.id,
    organizationId: demo.organizationId,
    mode: "test",
    livemode: false,
    scopes: row.scopes,
    agentIds: row.agent_ids,
    paidPlan: false,
  };
}
