import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitUntil } from "../helpers/wait.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../helpers/webhookReceiver.ts";
import { type ClientWorld, startClientWorld } from "./support.ts";

/**
 * The client outside Bun: the same script (fixtures/anywhere.ts) pages through calls, reads a
 * refusal and verifies a real webhook delivery on Deno (from the sources) and on Node (bundled, as a
 * Node project would build it). The client's own type check with browser and ES types only, and
 * with only erasable syntax (what Node's type stripping runs), is here too.
 */

const root = join(import.meta.dir, "..", "..");
const deno = join(root, "node_modules", ".bin", "deno");
const tsc5 = join(root, "node_modules", "typescript5", "bin", "tsc");
const script = join(import.meta.dir, "fixtures", "anywhere.ts");

let world: ClientWorld;
let receiver: WebhookReceiver;
let input: string;
let expected: Record<string, unknown>;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "client-runtimes-"));
  world = await startClientWorld({ timers: true });
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
  input = JSON.stringify({
    baseUrl: world.baseUrl,
    apiKey: world.seed.testKey,
    secret: endpoint.secret,
    delivery: { headers: delivery.headers, body: delivery.body },
  });
  expected = {
    ids,
    error: { status: 404, code: "not_found" },
    eventId: delivery.headers["webhook-id"],
    tampered: "WebhookVerificationError",
  };
});
afterAll(async () => {
  receiver.stop();
  await world.close();
  rmSync(dir, { recursive: true, force: true });
});

async function run(cmd: string[]): Promise<unknown> {
  const proc = Bun.spawn(cmd, {
    cwd: root,
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

test("on Deno, from the sources", async () => {
  expect(await run([deno, "run", "--allow-net", script, input])).toEqual(expected);
});

test("on Node, bundled", async () => {
  const built = await Bun.build({ entrypoints: [script], target: "node", format: "esm", outdir: dir });
  expect(built.success).toBe(true);
  expect(await run(["node", join(dir, "anywhere.js"), input])).toEqual(expected);
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
