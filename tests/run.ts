/**
 * `npm test`: the whole suite twice, on PostgreSQL and on the embedded database (TEST_DATABASE=embedded),
 * then the HTTP-level suite (tests/server/, a started server driven over HTTP) twice more against a
 * server on Deno (SERVER_RUNTIME=deno), on each database. Each pass writes a JUnit report to
 * .artifacts/junit/<pass>.xml. Prints bun's own output, one `<pass>: N passed, N failed[, N skipped]`
 * line per pass, then the same line for all; exits 1 if any pass failed or no test passed at all.
 *
 *   npm test                       every pass, every test file
 *   npm test -- tests/http         every pass, only the files under tests/http (any `bun test` filter;
 *                                  the Deno passes run those of tests/server/ only, or nothing)
 *   TEST_PASSES=embedded npm test  one pass only (postgres, embedded, deno-postgres, deno-embedded)
 *
 * Benchmarks are plain scripts in tests/bench/ (`agents.ts`, `webcalls.ts`, …), run through their own
 * `npm run bench:*` scripts: `bun test` picks up only `*.test.*`, `*_test.*`, `*.spec.*` and `*_spec.*`,
 * so none may be named like that (checked below).
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import postgres from "postgres";
import { PG_ADMIN_URL } from "./helpers/db.ts";

const REPORTS = ".artifacts/junit";
const ALL_PASSES = {
  postgres: {},
  embedded: { TEST_DATABASE: "embedded" },
  "deno-postgres": { SERVER_RUNTIME: "deno" },
  "deno-embedded": { SERVER_RUNTIME: "deno", TEST_DATABASE: "embedded" },
} as const;
type PassName = keyof typeof ALL_PASSES;

/** The suite that talks to a started server; the Deno passes run it alone (the rest runs in-process on Bun). */
const SERVER_SUITE = "tests/server";

/** The filters of a pass: all of them, or for a Deno pass those within the server suite (null: nothing to run). */
function passFilters(pass: PassName, filters: string[]): string[] | null {
  if (!("SERVER_RUNTIME" in ALL_PASSES[pass])) return filters;
  if (filters.length === 0) return [SERVER_SUITE];
  const within = filters.flatMap((f) => {
    const path = f.replace(/^\.\//, "");
    if (path.startsWith(SERVER_SUITE)) return [f];
    return SERVER_SUITE.startsWith(path.replace(/\/$/, "")) ? [SERVER_SUITE] : [];
  });
  return within.length > 0 ? [...new Set(within)] : null;
}

interface Counts {
  passed: number;
  failed: number;
  skipped: number;
}

/**
 * The one timeout of every test and hook (bun's default is 5 s). bun reads it only from this flag,
 * from setDefaultTimeout in a file, or from a test's own argument, never from bunfig.toml. A
 * beforeAll that opens an embedded database, or a test that runs the service as a child process,
 * takes seconds on a busy machine; a test that needs longer still says so where it is written.
 */
const BUN_TEST_FLAGS = ["--timeout=60000"];

const TEST_FILE = /(\.|_)(test|spec)\.[cm]?[jt]sx?$/;

async function main(): Promise<number> {
  const filters = process.argv.slice(2);
  const passes = (process.env.TEST_PASSES?.split(",") ?? Object.keys(ALL_PASSES)) as PassName[];
  rmSync(REPORTS, { recursive: true, force: true });
  mkdirSync(REPORTS, { recursive: true });

  const misnamed = listFiles("tests/bench").filter((f) => TEST_FILE.test(f));
  if (misnamed.length) {
    console.error(
      `Benchmarks must not be named like tests (bun test would run them): ${misnamed.join(", ")}`,
    );
    return 1;
  }

  // The server reads the widget from widget/dist/: built once here, not by each test that serves it.
  const widget = Bun.spawnSync([process.execPath, "src/widget/write.ts", "--if-stale"], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (widget.exitCode !== 0) {
    console.error("the widget build failed: see above");
    return 1;
  }

  const results: [PassName, Counts][] = [];
  for (const pass of passes) {
    if (!(pass in ALL_PASSES))
      throw new Error(`unknown pass ${pass}; use ${Object.keys(ALL_PASSES).join(",")}`);
    const selected = passFilters(pass, filters);
    if (!selected) {
      console.log(`\n=== ${pass}: nothing selected (this pass runs ${SERVER_SUITE} only)`);
      continue;
    }
    console.log(`\n=== ${pass}: bun test ${selected.join(" ")}`.trimEnd());
    results.push([pass, await runPass(pass, selected)]);
  }

  console.log("");
  // CI keeps only the end of the output: name every failure here, where it will be read.
  for (const [pass] of results) {
    for (const f of failuresOf(readReport(pass))) console.log(`FAILED ${pass}: ${f}`);
  }
  const total: Counts = { passed: 0, failed: 0, skipped: 0 };
  for (const [pass, c] of results) {
    console.log(`${pass}: ${line(c)}`);
    total.passed += c.passed;
    total.failed += c.failed;
    total.skipped += c.skipped;
  }
  console.log(line(total));
  return total.failed > 0 || total.passed === 0 ? 1 : 0;
}

async function runPass(pass: PassName, filters: string[]): Promise<Counts> {
  const report = join(REPORTS, `${pass}.xml`);
  if (!("TEST_DATABASE" in ALL_PASSES[pass])) {
    const problem = await postgresProblem();
    if (problem) {
      // A missing PostgreSQL fails the pass (the suite needs it), in CI and on a workstation alike.
      const message = `PostgreSQL is required at ${PG_ADMIN_URL} (set TEST_PG_URL to use another): ${problem}`;
      console.error(message);
      writeFileSync(report, syntheticReport(pass, [message]));
      return { passed: 0, failed: 1, skipped: 0 };
    }
  }
  const proc = Bun.spawn(
    [
      process.execPath,
      "test",
      ...BUN_TEST_FLAGS,
      "--reporter=junit",
      `--reporter-outfile=${report}`,
      ...filters,
    ],
    { env: { ...process.env, ...ALL_PASSES[pass] }, stdout: "pipe", stderr: "pipe" },
  );
  // bun prints its summary ("N fail") on stderr; keep a copy to reconcile it with the report.
  const [, errText] = await Promise.all([tee(proc.stdout, process.stdout), tee(proc.stderr, process.stderr)]);
  const exitCode = await proc.exited;
  return reconcile(pass, report, exitCode, errText);
}

/**
 * The JUnit report does not count errors outside tests (a file that fails to load, an unhandled
 * rejection between tests), nor a crash before the report is written. Those become failed test cases
 * of their own in the report, so everything that reads it (CI's summary) sees them.
 */
function reconcile(pass: PassName, report: string, exitCode: number, output: string): Counts {
  let xml = readReport(pass);
  const counts = countsOf(xml);
  const consoleFailed = Number(/^\s*(\d+) fail\s*$/m.exec(output)?.[1] ?? 0);
  const missing = Math.max(consoleFailed - counts.failed, exitCode !== 0 && counts.failed === 0 ? 1 : 0);
  if (missing > 0) {
    const why = `bun test exited with ${exitCode}: ${missing} failure(s) outside any test (see the output above)`;
    xml = xml.replace(/<\/testsuites>\s*$/, `${suite(`${pass}: outside tests`, [why])}\n</testsuites>\n`);
    if (!xml.includes(why)) xml = syntheticReport(pass, [why]);
    writeFileSync(report, xml);
  }
  return countsOf(xml);
}

function readReport(pass: PassName): string {
  try {
    return readFileSync(join(REPORTS, `${pass}.xml`), "utf8");
  } catch {
    return syntheticReport(pass, []);
  }
}

/**
 * The test cases of a report: each one's attributes and what it holds (empty when self-closing, as a
 * passing case may be: matched as such, so that it never spans to the next case's closing tag).
 */
function testCases(xml: string): { attrs: string; inner: string }[] {
  return [...xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)].map((m) => ({
    attrs: m[1] ?? "",
    inner: m[2] ?? "",
  }));
}

/**
 * Each failed test case of a report as `file > describe > name: message`, the message on one line
 * and cut at 300 characters (the report keeps all of it).
 */
export function failuresOf(xml: string): string[] {
  const attr = (attrs: string, name: string) =>
    unesc(new RegExp(`\\b${name}="([^"]*)"`).exec(attrs)?.[1] ?? "");
  const failures: string[] = [];
  for (const { attrs, inner } of testCases(xml)) {
    const failure = /<(?:failure|error)\b([^>]*)>/.exec(inner);
    if (!failure) continue;
    const where = [
      relative(process.cwd(), attr(attrs, "file")),
      attr(attrs, "classname"),
      attr(attrs, "name"),
    ];
    const message = attr(failure[1] ?? "", "message")
      .replace(/\s+/g, " ")
      .trim()
      .slice(0, 300);
    failures.push(`${where.filter(Boolean).join(" > ")}${message ? `: ${message}` : ""}`);
  }
  return failures;
}

/** Counts of a report: every testcase, failed if it holds <failure> or <error>, skipped if <skipped>. */
export function countsOf(xml: string): Counts {
  const counts: Counts = { passed: 0, failed: 0, skipped: 0 };
  for (const { inner } of testCases(xml)) {
    if (/<(failure|error)\b/.test(inner)) counts.failed++;
    else if (/<skipped\b/.test(inner)) counts.skipped++;
    else counts.passed++;
  }
  return counts;
}

function syntheticReport(pass: PassName, failures: string[]): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="bun test">\n${suite(pass, failures)}\n</testsuites>\n`;
}

function suite(name: string, failures: string[]): string {
  const cases = failures
    .map(
      (f) =>
        `    <testcase name="${esc(f)}" classname="${esc(name)}"><failure message="${esc(f)}" /></testcase>`,
    )
    .join("\n");
  return `  <testsuite name="${esc(name)}" tests="${failures.length}" failures="${failures.length}">\n${cases}\n  </testsuite>`;
}

function unesc(s: string): string {
  return s
    .replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)))
    .replace(/&#x([0-9a-f]+);/gi, (_, n) => String.fromCharCode(Number.parseInt(n, 16)))
    .replace(
      /&(lt|gt|quot|apos|amp);/g,
      (_, e) => ({ lt: "<", gt: ">", quot: '"', apos: "'", amp: "&" })[e as "lt"],
    );
}

function esc(s: string): string {
  return s.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function postgresProblem(): Promise<string | null> {
  const sql = postgres(PG_ADMIN_URL, { max: 1, connect_timeout: 5, onnotice: () => {} });
  try {
    await sql`select 1`;
    return null;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

async function tee(stream: ReadableStream<Uint8Array>, out: NodeJS.WriteStream): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of stream) {
    out.write(chunk);
    text += decoder.decode(chunk, { stream: true });
  }
  return text;
}

function listFiles(dir: string): string[] {
  try {
    return readdirSync(dir, { recursive: true, encoding: "utf8" }).map((f) => join(dir, f));
  } catch {
    return [];
  }
}

function line(c: Counts): string {
  return `${c.passed} passed, ${c.failed} failed${c.skipped ? `, ${c.skipped} skipped` : ""}`;
}

if (import.meta.main) process.exit(await main());
