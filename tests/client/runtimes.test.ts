import { afterAll, beforeAll, expect, test } from "bun:test";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Browser } from "playwright-core";
import { launchBrowser } from "../e2e/support.ts";
import { waitUntil } from "../helpers/wait.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../helpers/webhookReceiver.ts";
import { type ClientWorld, startClientWorld } from "./support.ts";

/**
 * The client outside Bun: the same script (fixtures/anywhere.mjs) pages through calls, reads a
 * refusal and verifies a real webhook delivery on Deno (from the TypeScript sources) and on the
 * machine's Node, which imports `voice-service/client` by its package name from a project of its own
 * (the package's export: the built ES module, src/client/dist/index.js). The client's own type check
 * with browser and ES types only, and with only erasable syntax (what Node's type stripping runs), is
 * here too, and a TypeScript project's check against the package's declarations.
 *
 * In headless Chromium, a page imports the built module. Secret-key routes answer no other origin (no
 * CORS: a secret key never belongs in a browser), so the page that pages through calls is served from
 * the API's own origin; the browser's own use of the client, starting a web call with a session token,
 * runs from another origin, as on a customer's website (that route allows any origin).
 */

const root = join(import.meta.dir, "..", "..");
const deno = join(root, "node_modules", ".bin", "deno");
const tsc5 = join(root, "node_modules", "typescript5", "bin", "tsc");
const script = join(import.meta.dir, "fixtures", "anywhere.mjs");

let world: ClientWorld;
let receiver: WebhookReceiver;
let input: Record<string, unknown>;
let expected: Record<string, unknown>;
let dir: string;
let project: string;
let browser: Browser;

/** The files a page imports: the package's export, as built, and the script every runtime runs. */
const PAGE_FILES: Record<string, { type: string; body: string }> = {
  "/client-test/index.html": { type: "text/html", body: "<!doctype html><title>client</title>" },
  "/client-test/client.js": {
    type: "text/javascript",
    body: readFileSync(join(root, "src", "client", "dist", "index.js"), "utf8"),
  },
  "/client-test/anywhere.mjs": { type: "text/javascript", body: readFileSync(script, "utf8") },
};
/** What the pages import, by URL (a variable, so that neither tsc nor Bun's transpiler resolves it). */
const MODULES = { client: "/client-test/client.js", script: "/client-test/anywhere.mjs" };
type ClientModule = typeof import("voice-service/client");

const servePage = (req: Request) => {
  const file = PAGE_FILES[new URL(req.url).pathname];
  return file && new Response(file.body, { headers: { "content-type": file.type } });
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "client-runtimes-"));
  project = integratorProject();
  browser = await launchBrowser();
  world = await startClientWorld({ timers: true, also: servePage });
  receiver = startWebhookReceiver();
  const client = world.client(world.seed.testKey);
  const endpoint = await client.webhookEndpoints.create({
    url: receiver.url("/any"),
    events: ["contact.created"],
  });
  await client.contacts.create({ phone: "+33612345678" });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    ids.unshift((await client.calls.create({ agentId: world.seed.agent.id, to: "+33612345678" })).id);
  }
  const delivery = await waitUntil("the delivery", () => receiver.at("/any")[0]);
  input = {
    baseUrl: world.baseUrl,
    apiKey: world.seed.testKey,
    secret: endpoint.secret,
    delivery: { headers: delivery.headers, body: delivery.body },
  };
  expected = {
    ids,
    error: { status: 404, code: "not_found" },
    eventId: delivery.headers["webhook-id"],
    tampered: "WebhookVerificationError",
  };
});
afterAll(async () => {
  await browser?.close();
  receiver.stop();
  await world.close();
  rmSync(dir, { recursive: true, force: true });
});

async function run(cmd: string[], cwd = root): Promise<unknown> {
  const proc = Bun.spawn(cmd, {
    cwd,
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_COLOR: "1" },
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (code !== 0) throw new Error(`${cmd.join(" ")} exited ${code}: ${err}`);
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

/** A project of an integrator's: `node_modules/voice-service` is this package (a link, as `npm link` makes). */
function integratorProject(): string {
  const project = join(dir, "project");
  mkdirSync(join(project, "node_modules"), { recursive: true });
  symlinkSync(root, join(project, "node_modules", "voice-service"), "dir");
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "integrator", type: "module" }));
  copyFileSync(script, join(project, "main.mjs"));
  return project;
}

test("on Deno, from the sources", async () => {
  const module = pathToFileURL(join(root, "src", "client", "index.ts")).href;
  // The client is imported by the specifier it is given, so Deno must be allowed to read its folder.
  const allowRead = `--allow-read=${join(root, "src", "client")}`;
  const result = await run([
    deno,
    "run",
    "--allow-net",
    allowRead,
    script,
    JSON.stringify({ ...input, module }),
  ]);
  expect(result).toEqual(expected);
});

test("on the machine's Node, imported by its package name", async () => {
  const version = Bun.spawnSync(["node", "--version"], { stdout: "pipe" }).stdout.toString().trim();
  // Node 20 runs no TypeScript: the package must export JavaScript.
  expect(version).toMatch(/^v\d+\./);
  const result = await run(
    ["node", "main.mjs", JSON.stringify({ ...input, module: "voice-service/client" })],
    project,
  );
  expect(result).toEqual(expected);
});

test("a TypeScript project type-checks against the package's declarations (Node's module resolution)", () => {
  writeFileSync(
    join(project, "check.ts"),
    [
      'import { VoiceService, type Call } from "voice-service/client";',
      'const client = new VoiceService({ apiKey: "inf_test_x", baseUrl: "http://127.0.0.1:1" });',
      "export async function last(): Promise<string> {",
      '  const call: Call = await client.calls.get("call_x");',
      "  return call.updatedAt;",
      "}",
      "// @ts-expect-error: the declarations are precise, not `any`.",
      "export const wrong: number = ({} as Call).updatedAt;",
    ].join("\n"),
  );
  const config = join(project, "tsconfig.json");
  writeFileSync(
    config,
    JSON.stringify({
      compilerOptions: {
        noEmit: true,
        strict: true,
        target: "es2022",
        module: "nodenext",
        moduleResolution: "nodenext",
        lib: ["es2023", "dom"],
        types: [],
      },
      files: ["check.ts"],
    }),
  );
  const check = Bun.spawnSync(["node", tsc5, "-p", config], { cwd: project, stdout: "pipe", stderr: "pipe" });
  expect(check.stdout.toString() + check.stderr.toString()).toBe("");
  expect(check.exitCode).toBe(0);
});

test("type-checks with browser and ES types only (no Node, Bun or Deno types), erasable syntax only", () => {
  const config = join(dir, "tsconfig.json");
  writeFileSync(
    config,
    JSON.stringify({
      compilerOptions: {
        noEmit: true,
        strict: true,
        erasableSyntaxOnly: true,
        verbatimModuleSyntax: true,
        target: "es2022",
        module: "preserve",
        moduleResolution: "bundler",
        allowImportingTsExtensions: true,
        lib: ["es2023", "dom", "dom.iterable"],
        types: [],
      },
      files: [join(root, "src", "client", "index.ts")],
    }),
  );
  const check = Bun.spawnSync(["node", tsc5, "-p", config], { cwd: root, stdout: "pipe", stderr: "pipe" });
  expect(check.stdout.toString() + check.stderr.toString()).toBe("");
  expect(check.exitCode).toBe(0);
});

test("in headless Chromium, a page on the API's origin imports the built module", async () => {
  const page = await browser.newPage();
  try {
    await page.goto(`${world.baseUrl}/client-test/index.html`);
    const result = await page.evaluate(
      async ({ modules, input }) => {
        const client = await import(modules.client);
        const { exercise } = await import(modules.script);
        return exercise(client, input);
      },
      { modules: MODULES, input },
    );
    expect(result).toEqual(expected);
  } finally {
    await page.close();
  }
});

test("in headless Chromium, a page of another origin starts a web call with a session token", async () => {
  const client = world.client(world.seed.testKey);
  const { token } = await client.webCallSessions.create({ agentId: world.seed.agent.id });
  // Another origin: a website of the integrator's, serving the built module itself.
  const site = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) => servePage(req) ?? new Response(null, { status: 404 }),
  });
  const page = await browser.newPage();
  try {
    await page.goto(`http://127.0.0.1:${site.port}/client-test/index.html`);
    const result = await page.evaluate(
      async ({ modules, baseUrl, token, apiKey }) => {
        const { VoiceService, VoiceServiceError }: ClientModule = await import(modules.client);
        const refusal = (err: unknown) =>
          err instanceof VoiceServiceError ? { status: err.status, code: err.code } : String(err);
        const visitor = new VoiceService({ baseUrl });
        const started = await visitor.webCalls.start({ sessionToken: token });
        const again = await visitor.webCalls.start({ sessionToken: token }).catch(refusal);
        // A secret-key route answers no other origin: the browser keeps the answer from the page.
        const secret = await new VoiceService({ baseUrl, apiKey }).calls.list().page().catch(refusal);
        return { livemode: started.livemode, callId: started.callId, again, secret };
      },
      { modules: MODULES, baseUrl: world.baseUrl, token, apiKey: world.seed.testKey },
    );
    expect(result).toMatchObject({
      livemode: false,
      again: { status: 401, code: "invalid_session_token" },
      secret: { status: 0, code: "connection_error" },
    });
    expect(result.callId).toMatch(/^call_/);
  } finally {
    await page.close();
    site.stop(true);
  }
});
