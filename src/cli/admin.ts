import { z } from "@hono/zod-openapi";
import type { Sql } from "postgres";
import type { Clock } from "../clock.ts";
import { ApiError, describeIssues } from "../errors.ts";
import {
  createAgent,
  createKnowledgeBase,
  createOrganization,
  createPublishableKey,
  createSecretKey,
  listAgentsOf,
  listOrganizations,
  revokePublishableKey,
  revokeSecretKey,
  updateAgent,
  updateOrganization,
} from "../services/tenancy.ts";

/**
 * `voice-service admin <command> …`: the operations of the admin API, run straight on the database
 * through the same service functions (so the same validation and the same answers). Pure: it takes
 * the arguments and a database, and returns what to print and the exit code; main.ts does the I/O.
 */

export interface AdminContext {
  sql: Sql;
  clock: Clock;
}

export interface AdminResult {
  /** 0 success, 1 refused or failed, 2 usage error. */
  code: 0 | 1 | 2;
  stdout: string;
  stderr: string;
}

type Kind = "text" | "integer" | "boolean" | "list" | "nullableText";

interface Flag {
  kind: Kind;
  /** The input field it fills; by default the camelCase of the flag name. */
  field?: string;
  required?: boolean;
  /** Placeholder shown in the help, e.g. `<id>`. */
  value: string;
  help: string;
}

type Fields = Record<string, unknown>;

interface Command {
  summary: string;
  /** Name of the one positional argument (the object's id), when the command takes one. */
  id?: string;
  flags: Record<string, Flag>;
  run(ctx: AdminContext, id: string, fields: Fields): Promise<unknown>;
}

const organizationFlag: Flag = {
  kind: "text",
  required: true,
  value: "<org-id>",
  help: "The organization (org_…).",
};

/** Takes the organization id out of the fields: it is a path, not a body field. */
function withOrganization(fields: Fields): [string, Fields] {
  const { organization, ...rest } = fields;
  return [organization as string, rest];
}

const commands: Record<string, Command> = {
  "create-organization": {
    summary: "Create an organization.",
    flags: {
      name: { kind: "text", required: true, value: "<text>", help: "Name of the organization." },
      "paid-plan": { kind: "boolean", value: "true|false", help: "Active paid plan (default false)." },
      "plan-minutes": {
        kind: "integer",
        value: "<n>",
        help: "Monthly allowance of live minutes (default 0).",
      },
    },
    run: (ctx, _id, fields) => createOrganization(ctx, fields as never),
  },
  "update-organization": {
    summary: "Change the name, paid plan or plan minutes of an organization.",
    id: "<org-id>",
    flags: {
      name: { kind: "text", value: "<text>", help: "New name." },
      "paid-plan": { kind: "boolean", value: "true|false", help: "Active paid plan." },
      "plan-minutes": {
        kind: "integer",
        value: "<n>",
        help: "Monthly allowance of live minutes (the usage is kept).",
      },
    },
    run: (ctx, id, fields) => updateOrganization(ctx, id, fields as never),
  },
  "list-organizations": {
    summary: "List every organization, newest first.",
    flags: {},
    run: (ctx) => listOrganizations(ctx),
  },
  "create-agent": {
    summary: "Create an agent in an organization.",
    flags: {
      organization: organizationFlag,
      name: { kind: "text", required: true, value: "<text>", help: "Name of the agent." },
      active: { kind: "boolean", value: "[true|false]", help: "Takes calls (default true)." },
      "livekit-agent-name": {
        kind: "text",
        value: "<text>",
        help: "Agent name dispatched on the media server (default: the agent id).",
      },
      language: { kind: "text", value: "en|fr", help: "Language of the agent (default en)." },
    },
    run: (ctx, _id, fields) => {
      const [organization, input] = withOrganization(fields);
      return createAgent(ctx, organization, input as never);
    },
  },
  "update-agent": {
    summary: "Change the name, state, media server name or language of an agent.",
    id: "<agent-id>",
    flags: {
      name: { kind: "text", value: "<text>", help: "New name." },
      active: { kind: "boolean", value: "[true|false]", help: "Takes calls or not." },
      "livekit-agent-name": {
        kind: "nullableText",
        value: "<text>",
        help: 'Agent name dispatched on the media server; "" clears it (the agent id is used).',
      },
      language: { kind: "text", value: "en|fr", help: "Language of the agent." },
    },
    run: (ctx, id, fields) => updateAgent(ctx, id, fields as never),
  },
  "list-agents": {
    summary: "List the agents of an organization, newest first.",
    flags: { organization: organizationFlag },
    run: (ctx, _id, fields) => listAgentsOf(ctx, withOrganization(fields)[0]),
  },
  "create-secret-key": {
    summary: "Create a secret key; the key is printed this once (only its hash is stored).",
    flags: {
      organization: organizationFlag,
      mode: { kind: "text", required: true, value: "live|test", help: "Live or test key." },
      scopes: {
        kind: "list",
        required: true,
        value: "<a,b,…>",
        help: "Comma-separated scopes, e.g. webcalls:write,calls:write, or * for all.",
      },
      "agent-ids": {
        kind: "list",
        value: "<agt_…,…>",
        help: "Restrict the key to these agents of the organization.",
      },
    },
    run: (ctx, _id, fields) => {
      const [organization, input] = withOrganization(fields);
      return createSecretKey(ctx, organization, input as never);
    },
  },
  "create-publishable-key": {
    summary: "Create a publishable key for one agent; the key is printed this once.",
    flags: {
      organization: organizationFlag,
      agent: {
        kind: "text",
        field: "agentId",
        required: true,
        value: "<agent-id>",
        help: "The agent (agt_…).",
      },
      origins: {
        kind: "list",
        field: "allowedOrigins",
        required: true,
        value: "<https://a,…>",
        help: "Comma-separated HTTPS origins allowed to use the key (no wildcard, no path).",
      },
      "monthly-minute-cap": {
        kind: "integer",
        required: true,
        value: "<n>",
        help: "Web call minutes per calendar month (at least 1).",
      },
    },
    run: (ctx, _id, fields) => {
      const [organization, input] = withOrganization(fields);
      return createPublishableKey(ctx, organization, input as never);
    },
  },
  "revoke-secret-key": {
    summary: "Revoke a secret key (immediately refused).",
    id: "<key-id>",
    flags: {},
    run: (ctx, id) => revokeSecretKey(ctx, id),
  },
  "revoke-publishable-key": {
    summary: "Revoke a publishable key (immediately refused).",
    id: "<key-id>",
    flags: {},
    run: (ctx, id) => revokePublishableKey(ctx, id),
  },
  "create-knowledge-base": {
    summary: "Create a knowledge base in an organization.",
    flags: {
      organization: organizationFlag,
      name: { kind: "text", required: true, value: "<text>", help: "Name of the knowledge base." },
    },
    run: (ctx, _id, fields) => {
      const [organization, input] = withOrganization(fields);
      return createKnowledgeBase(ctx, organization, input as never);
    },
  },
};

/** A parsed command line, ready to run against a database. */
export interface AdminInvocation {
  command: Command;
  id: string;
  fields: Fields;
}

class UsageError extends Error {
  constructor(
    message: string,
    readonly param?: string,
  ) {
    super(message);
  }
}

/**
 * Parses the arguments after `admin`. Returns the final result for `help` and usage errors (no
 * database needed), or the invocation to run.
 */
export function parseAdmin(argv: readonly string[]): AdminResult | AdminInvocation {
  try {
    return parse(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      const body = errorJson(
        "usage_error",
        `${err.message} Run \`voice-service admin help\` for usage.`,
        err.param,
      );
      return { code: 2, stdout: "", stderr: body };
    }
    throw err;
  }
}

/** Runs a parsed invocation: the JSON answer on stdout (0), or the error on stderr (1). */
export async function executeAdmin(invocation: AdminInvocation, ctx: AdminContext): Promise<AdminResult> {
  try {
    const answer = await invocation.command.run(ctx, invocation.id, invocation.fields);
    return { code: 0, stdout: `${JSON.stringify(answer, null, 2)}\n`, stderr: "" };
  } catch (err) {
    if (err instanceof ApiError) return adminFailure(err.code, err.message, err.param);
    if (err instanceof z.ZodError) {
      const { message, param } = describeIssues(err.issues);
      return adminFailure("invalid_request", message, param);
    }
    return adminFailure("internal_error", err instanceof Error ? err.message : String(err));
  }
}

/** Parse and run: `runAdmin(["create-organization", "--name", "Acme"], {sql, clock})`. */
export async function runAdmin(argv: readonly string[], ctx: AdminContext): Promise<AdminResult> {
  const parsed = parseAdmin(argv);
  return "code" in parsed ? parsed : executeAdmin(parsed, ctx);
}

function findCommand(name: string): Command {
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) throw new UsageError(`Unknown command "${name}".`);
  return command;
}

function parse(argv: readonly string[]): AdminResult | AdminInvocation {
  const [name, ...rest] = argv;
  if (name === undefined) throw new UsageError("Missing command.");
  if (name === "help" || name === "--help" || name === "-h") {
    if (rest.length > 1) throw new UsageError("help takes at most one command name.");
    const topic = rest[0];
    if (topic === undefined) return { code: 0, stdout: generalHelp(), stderr: "" };
    const command = findCommand(topic);
    return { code: 0, stdout: commandHelp(topic, command), stderr: "" };
  }
  const command = findCommand(name);

  let id: string | undefined;
  const raw = new Map<string, string>();
  for (let i = 0; i < rest.length; i++) {
    const token = rest[i]!;
    if (token === "--help" || token === "-h")
      return { code: 0, stdout: commandHelp(name, command), stderr: "" };
    if (!token.startsWith("--")) {
      if (!command.id || id !== undefined) throw new UsageError(`Unexpected argument "${token}".`);
      id = token;
      continue;
    }
    const eq = token.indexOf("=");
    const flagName = eq === -1 ? token.slice(2) : token.slice(2, eq);
    const flag = Object.hasOwn(command.flags, flagName) ? command.flags[flagName] : undefined;
    if (!flag) throw new UsageError(`Unknown option --${flagName} for ${name}.`, `--${flagName}`);
    if (raw.has(flagName)) throw new UsageError(`--${flagName} is given twice.`, `--${flagName}`);
    let value: string | undefined;
    if (eq !== -1) {
      value = token.slice(eq + 1);
    } else if (flag.kind === "boolean") {
      // A bare boolean flag means true. The next word is its value when it is true/false, or when it
      // cannot be the command's id (so `--paid-plan yes` is reported as a bad value, not a stray word).
      const next = rest[i + 1];
      const takesNext =
        next !== undefined &&
        !next.startsWith("--") &&
        (next === "true" || next === "false" || !command.id || id !== undefined);
      if (takesNext) i++;
      value = takesNext ? next : "true";
    } else {
      const next = rest[i + 1];
      if (next === undefined || next.startsWith("--"))
        throw new UsageError(`--${flagName} needs a value (${flag.value}).`, `--${flagName}`);
      value = next;
      i++;
    }
    raw.set(flagName, value);
  }
  if (command.id && id === undefined) throw new UsageError(`Missing ${command.id} for ${name}.`);
  for (const [flagName, flag] of Object.entries(command.flags)) {
    if (flag.required && !raw.has(flagName))
      throw new UsageError(`Missing --${flagName} ${flag.value} for ${name}.`, `--${flagName}`);
  }
  const fields: Fields = {};
  for (const [flagName, value] of raw) {
    const flag = command.flags[flagName]!;
    fields[flag.field ?? camelCase(flagName)] = convert(flag.kind, value);
  }
  return { command, id: id ?? "", fields };
}

/**
 * Turns the text of a flag into the JSON value the service expects. Anything that does not look
 * like the expected type is passed on as text, so the service's own validation reports it with
 * the same message and `param` as the API would.
 */
function convert(kind: Kind, value: string): unknown {
  switch (kind) {
    case "integer":
      return value.trim() !== "" && Number.isFinite(Number(value)) ? Number(value) : value;
    case "boolean":
      return value === "true" ? true : value === "false" ? false : value;
    case "list":
      return value
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
    case "nullableText":
      return value === "" ? null : value;
    case "text":
      return value;
  }
}

function camelCase(flagName: string): string {
  return flagName.replace(/-([a-z])/g, (_, ch: string) => ch.toUpperCase());
}

function errorJson(code: string, message: string, param?: string): string {
  return `${JSON.stringify({ error: { code, message, ...(param ? { param } : {}) } }, null, 2)}\n`;
}

/** A refusal or failure: the error on stderr, exit code 1. */
export function adminFailure(code: string, message: string, param?: string): AdminResult {
  return { code: 1, stdout: "", stderr: errorJson(code, message, param) };
}

function synopsis(name: string, command: Command): string {
  const parts = [name];
  if (command.id) parts.push(command.id);
  for (const [flagName, flag] of Object.entries(command.flags)) {
    const text = `--${flagName} ${flag.value}`;
    parts.push(flag.required ? text : `[${text}]`);
  }
  return parts.join(" ");
}

function generalHelp(): string {
  const lines = [
    "Usage: voice-service admin <command> [<id>] [--option value …]",
    "",
    "Operator commands, run straight on the database (DATABASE_URL, or the embedded database in",
    "DATA_DIR: stop the server first, the embedded database opens in one process at a time).",
    'Each prints its JSON answer on stdout; a refusal prints {"error": {"code", "message", "param"}}',
    "on stderr and exits with 1 (2 for a usage error).",
    "",
    "Commands:",
    ...Object.entries(commands).map(
      ([name, command]) => `  ${synopsis(name, command)}\n      ${command.summary}`,
    ),
    "",
    "Run `voice-service admin help <command>` for the options of one command.",
  ];
  return `${lines.join("\n")}\n`;
}

function commandHelp(name: string, command: Command): string {
  const lines = [`Usage: voice-service admin ${synopsis(name, command)}`, "", command.summary];
  const flags = Object.entries(command.flags);
  if (flags.length) {
    lines.push("", "Options:");
    for (const [flagName, flag] of flags) {
      const option = `  --${flagName} ${flag.value}`;
      lines.push(`${option.padEnd(34)}${flag.help}${flag.required ? " Required." : ""}`);
    }
  }
  return `${lines.join("\n")}\n`;
}
