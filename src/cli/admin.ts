import { z } from "@hono/zod-openapi";
import { type AdminOperation, adminOperations } from "../admin/operations.ts";
import { idParams } from "../admin/schema/fields.ts";
import type { Deps } from "../deps.ts";
import { ApiError, describeIssues } from "../errors.ts";

/**
 * `voice-service admin <command> …`: the operations of the admin API (admin/operations.ts), run
 * straight on the database with the same validation and the same service calls, so the same answers.
 * Each operation's flags come from its body schema. Pure: it takes the arguments and the dependencies,
 * and returns what to print and the exit code; main.ts does the I/O.
 */

export interface AdminResult {
  /** 0 success, 1 refused or failed, 2 usage error. */
  code: 0 | 1 | 2;
  stdout: string;
  stderr: string;
}

type Kind =
  | "text"
  | "integer"
  | "boolean"
  | "list"
  | "nullableList"
  | "nullableText"
  | "json"
  | "nullableJson";

interface Flag {
  kind: Kind;
  /** The input field it fills (or the path id). */
  field: string;
  required: boolean;
  /** Placeholder shown in the help, e.g. `<id>`. */
  value: string;
  help: string;
}

type Fields = Record<string, unknown>;

interface Command {
  operation: AdminOperation;
  summary: string;
  /** Name of the one positional argument (the object's id), when the command takes one. */
  id?: string;
  flags: Record<string, Flag>;
  /**
   * Other names a flag answers to: a field whose flag is shortened (`--agent`) is also taken under
   * its field's own kebab-case name (`--agent-id`), which is the rule for every other flag, and the
   * organization flag as `--organization-id`. Not shown in the help, which names one way.
   */
  aliases: Record<string, string>;
}

/** The path id travels as this field between parsing and running. */
const ID_FIELD = "\u0000id";

/** What a body field's schema asks for on the command line. */
function fieldKind(schema: z.ZodType): { kind: Kind; required: boolean } {
  let s = schema as unknown as { _zod: { def: { type: string; innerType?: unknown; in?: unknown } } };
  let required = true;
  let nullable = false;
  for (;;) {
    const def = s._zod.def;
    if (def.type === "optional" || def.type === "default") required = false;
    else if (def.type === "nullable") nullable = true;
    // A transformed value (a canonicalised tag, a de-duplicated list) is typed by what it takes.
    else if (def.type === "pipe") {
      s = def.in as typeof s;
      continue;
    } else break;
    s = def.innerType as typeof s;
  }
  const type = s._zod.def.type;
  const kind: Kind =
    type === "boolean"
      ? "boolean"
      : type === "number"
        ? "integer"
        : type === "array"
          ? nullable
            ? "nullableList"
            : "list"
          : type === "object"
            ? nullable
              ? "nullableJson"
              : "json"
            : nullable
              ? "nullableText"
              : "text";
  return { kind, required };
}

const kebab = (field: string) => field.replace(/[A-Z]/g, (ch) => `-${ch.toLowerCase()}`);

function commandOf(op: AdminOperation): Command {
  const flags: Record<string, Flag> = {};
  const aliases: Record<string, string> = {};
  let id: string | undefined;
  if (op.id) {
    if ("positional" in op.id.cli) id = op.id.cli.positional;
    else {
      const { flag, value, help } = op.id.cli;
      flags[flag] = { kind: "text", field: ID_FIELD, required: true, value, help };
      aliases[`${flag}-id`] = flag;
    }
  }
  const input = op.body ?? op.query;
  const shape = (input as unknown as { shape?: Record<string, z.ZodType> } | undefined)?.shape ?? {};
  for (const [field, schema] of Object.entries(shape)) {
    const o = op.flags?.[field] ?? {};
    const { kind, required } = fieldKind(schema);
    const name = o.flag ?? kebab(field);
    flags[name] = {
      kind,
      field,
      required,
      value: o.value ?? `<${kebab(field)}>`,
      help: o.help ?? "",
    };
    if (name !== kebab(field)) aliases[kebab(field)] = name;
  }
  // An alias never hides a flag of its own name.
  for (const alias of Object.keys(aliases)) if (Object.hasOwn(flags, alias)) delete aliases[alias];
  return { operation: op, summary: `${op.summary}.`, ...(id ? { id } : {}), flags, aliases };
}

const commands: Record<string, Command> = Object.fromEntries(
  adminOperations.map((op) => [op.name, commandOf(op)]),
);

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

/**
 * Runs a parsed invocation: the JSON answer on stdout (0), or the error on stderr (1). The input is
 * checked as the admin route checks its request (routes/admin/index.ts, in zod-openapi's order): a
 * read's query, then the id with the route's own path schema, then a write's body.
 */
export async function executeAdmin(invocation: AdminInvocation, deps: Deps): Promise<AdminResult> {
  try {
    const { [ID_FIELD]: idField, ...fields } = invocation.fields;
    const op = invocation.command.operation;
    const id = String(idField ?? invocation.id);
    let input: Fields = fields;
    if (op.query) input = validate(op.query, fields, "invalid_query");
    if (op.id) checkId(op.id, id);
    if (op.body) input = validate(op.body, fields, "invalid_request");
    const answer = await op.run(deps, id, input);
    return { code: 0, stdout: `${JSON.stringify(answer, null, 2)}\n`, stderr: "" };
  } catch (err) {
    if (err instanceof ApiError) return adminFailure(err.code, err.message, err.param);
    // A service's own validation failing: what the API's onError answers too.
    if (err instanceof z.ZodError) {
      const { message, param } = describeIssues(err.issues);
      return adminFailure("invalid_request", message, param);
    }
    return adminFailure("internal_error", err instanceof Error ? err.message : String(err));
  }
}

/** The input against its schema; a failure is the code the API answers, with the same message and param. */
function validate(schema: z.ZodType, fields: Fields, code: "invalid_query" | "invalid_request"): Fields {
  const result = schema.safeParse(fields);
  if (result.success) return result.data as Fields;
  const { message, param } = describeIssues(result.error.issues);
  throw new ApiError(code, message, param ? { param } : {});
}

/**
 * The id the command acts on, against the route's path schema (admin/schema/fields.ts): one that
 * cannot be the object's is 404 `not_found` with the API's message and no param, like an unknown one
 * and whatever the body holds.
 */
function checkId(spec: NonNullable<AdminOperation["id"]>, id: string): void {
  const result = idParams(spec.prefix, spec.example).safeParse({ id });
  if (!result.success) throw new ApiError("not_found", result.error.issues[0]?.message ?? "No such object.");
}

/** Parse and run: `runAdmin(["create-organization", "--name", "Acme"], deps)`. */
export async function runAdmin(argv: readonly string[], deps: Deps): Promise<AdminResult> {
  const parsed = parseAdmin(argv);
  return "code" in parsed ? parsed : executeAdmin(parsed, deps);
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
    const given = eq === -1 ? token.slice(2) : token.slice(2, eq);
    const flagName = Object.hasOwn(command.aliases, given) ? command.aliases[given]! : given;
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
        throw new UsageError(`--${given} needs a value (${flag.value}).`, `--${given}`);
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
    fields[flag.field] = convert(flag.kind, value);
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
    case "nullableList":
      return value === "" ? null : convert("list", value);
    case "nullableText":
      return value === "" ? null : value;
    case "json":
      try {
        return JSON.parse(value);
      } catch {
        return value;
      }
    case "nullableJson":
      return value === "" ? null : convert("json", value);
    case "text":
      return value;
  }
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
