import process from "node:process";

/** JSON-line logger on stdout. Callers pass fields, never secrets: see redact() for the safety net. */
export type LogLevel = "debug" | "info" | "warn" | "error";
const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** Anything shaped like one of our secrets is masked before it is written, whatever the caller passed. */
const SECRET = /\b(inf_(?:live|test|pub|wcs)_|whsec_)[A-Za-z0-9+/=_-]+/g;
export function redact(text: string): string {
  return text.replace(SECRET, "$1[redacted]");
}

export function createLogger(level: LogLevel = "info", write: (line: string) => void = defaultWrite): Logger {
  const min = rank[level];
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (rank[lvl] < min) return;
    const line = JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...fields });
    write(redact(line));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

function defaultWrite(line: string) {
  process.stdout.write(`${line}\n`);
}

export const silentLogger: Logger = createLogger("error", () => {});
