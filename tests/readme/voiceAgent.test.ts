import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "../../src/runtime/bun.ts";
import type { RunningServer } from "../../src/runtime/runtime.ts";
import { createAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { createKnowledgeBase } from "../../src/services/knowledgeBases.ts";
import { liveKitEvents } from "../helpers/fakeLivekit.ts";
import {
  mintToken,
  type Seed,
  seedOrganization,
  startCall,
  startWorld,
  type WebCallWorld,
} from "../webcalls/support.ts";

/**
 * The README's "Writing the voice agent" code, taken from README.md as it is and run as a script (a
 * separate process, over HTTP) against the service, for a live web call dispatched through the fake
 * media server: the job metadata it reads is the one the service really dispatched.
 */

const README = join(import.meta.dir, "..", "..", "README.md");

/** The first TypeScript block of the README's section `title`. */
function readmeCode(title: string): string {
  const text = readFileSync(README, "utf8");
  const start = text.indexOf(`\n## ${title}\n`);
  if (start === -1) throw new Error(`README.md has no section "${title}"`);
  const end = text.indexOf("\n## ", start + 1);
  const section = text.slice(start, end === -1 ? undefined : end);
  const block = /```ts\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error(`the section "${title}" has no ts block`);
  return block[1]!;
}

/** The test's side of the worker: a scripted conversation that looks one thing up, then the runner's output. */
const RUNNER = `
import { handleJob } from "./voice-agent.ts";

let seen: unknown = null;
await handleJob(process.env.JOB_METADATA!, async ({ agent, variables, lookUp }) => {
  const answers = await lookUp("Are you open on Saturday?");
  // Longer than a query may be, with a character outside the BMP where a cut by UTF-16 units would halve it.
  const long = await lookUp(\`Saturdays \${"x".repeat(489)}😀 \${"🙂".repeat(600)}\`);
  const emoji = await lookUp("🙂".repeat(600));
  seen = { agent, variables, answers, long, emoji };
  return {
    transcript: [
      { speaker: "agent", text: agent.greeting ?? "Hello", offsetSeconds: 0.5 },
      { speaker: "contact", text: "Are you open on Saturday?", offsetSeconds: 2 },
      { speaker: "agent", text: answers[0] ?? "I do not know.", offsetSeconds: 3.5 },
    ],
    summary: "The caller asked about Saturday.",
    collectedData: { topic: "opening hours", firstName: String(variables.firstName) },
    successful: true,
    outcome: "question_answered",
  };
});
console.log(JSON.stringify(seen));
`;

let w: WebCallWorld;
let seed: Seed;
let server: RunningServer;
let dir: string;

beforeAll(async () => {
  w = await startWorld({ timers: true });
  seed = await seedOrganization(w.ctx, { planMinutes: 1000, cap: 1000 });
  server = serve(w.ctx.app.fetch, { port: 0, hostname: "127.0.0.1" });
  dir = mkdtempSync(join(tmpdir(), "voice-agent-"));
  writeFileSync(join(dir, "voice-agent.ts"), readmeCode("Writing the voice agent"));
  writeFileSync(join(dir, "runner.ts"), RUNNER);
});
afterAll(async () => {
  await server.stop();
  await w.close();
  rmSync(dir, { recursive: true, force: true });
});

test("the README's voice agent reads its settings, searches knowledge and reports the results of a live call", async () => {
  const c = w.ctx.deps;
  const kb = await createKnowledgeBase(c, seed.org.id, { name: "Shop", language: "en" });
  const doc = await w.ctx.request(`/api/v1/knowledge-bases/${kb.id}/documents`, {
    method: "POST",
    key: seed.liveKey,
    json: {
      title: "Opening hours",
      text: "We are open Monday to Friday, 9:00 to 18:00.\n\nOn Saturdays we open from 10:00 to 13:00.",
    },
  });
  expect(doc.status).toBe(201);
  const agent = await createAgent(c, seed.org.id, {
    name: "Front desk",
    language: "en-GB",
    instructions: "Answer questions about the shop.",
    greeting: "Hello, Acme shop, how can I help?",
    knowledgeBaseIds: [kb.id],
  });
  const workerKey = await createSecretKey(c, seed.org.id, {
    mode: "live",
    scopes: ["calls:read", "calls:write", "agents:read", "knowledge:read"],
  });

  // A live web call: the service dispatches the agent with the call's metadata.
  const token = await mintToken(w.ctx, seed.liveKey, agent.id, { firstName: "Claire" });
  const started = await startCall(w.ctx, { sessionToken: token });
  expect(started.status).toBe(201);
  const { callId } = await started.json();
  const dispatch = w.liveKit.dispatches.find((d) => d.room === callId);
  expect(dispatch).toBeDefined();
  const joined = await w.liveKit.signWebhook(liveKitEvents.participantJoined(callId, `visitor-${callId}`));
  await w.ctx.request("/api/livekit/webhook", { method: "POST", body: joined.body, headers: joined.headers });

  const proc = Bun.spawn([process.execPath, join(dir, "runner.ts")], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? "",
      VOICE_SERVICE_URL: `http://127.0.0.1:${server.port}`,
      VOICE_SERVICE_KEY: workerKey.key,
      JOB_METADATA: dispatch!.metadata,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, out, err] = await Promise.all([
    proc.exited,
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
  ]);
  expect({ code, err }).toEqual({ code: 0, err: "" });
  const seen = JSON.parse(out.trim());
  expect(seen.agent).toMatchObject({
    id: agent.id,
    language: "en-GB",
    instructions: "Answer questions about the shop.",
    greeting: "Hello, Acme shop, how can I help?",
    knowledgeBaseIds: [kb.id],
  });
  expect(seen.variables).toEqual({ firstName: "Claire" });
  expect(seen.answers[0]).toContain("On Saturdays we open from 10:00 to 13:00.");
  // Long questions are cut to what the search accepts (500 characters), never into half a character.
  expect(seen.long[0]).toContain("On Saturdays we open from 10:00 to 13:00.");
  expect(seen.emoji).toEqual([]);

  // Reported while the call is on: the events come with its end.
  const call = await (await w.ctx.request(`/api/v1/calls/${callId}`, { key: seed.liveKey })).json();
  expect(call).toMatchObject({ status: "ongoing", outcome: "question_answered", successful: true });
  const finished = await w.liveKit.signWebhook(liveKitEvents.roomFinished(callId));
  await w.ctx.request("/api/livekit/webhook", {
    method: "POST",
    body: finished.body,
    headers: finished.headers,
  });
  const events = await c.sql<{ type: string }[]>`
    select type from events where data->>'id' = ${callId} or data->>'callId' = ${callId} order by id`;
  expect(events.map((e) => e.type)).toEqual([
    "call.started",
    "call.ended",
    "call.transcript_ready",
    "call.analysis_ready",
  ]);
  const transcript = await (
    await w.ctx.request(`/api/v1/calls/${callId}/transcript`, { key: seed.liveKey })
  ).json();
  expect(transcript.segments.map((s: { text: string }) => s.text)).toEqual([
    "Hello, Acme shop, how can I help?",
    "Are you open on Saturday?",
    expect.stringContaining("On Saturdays we open from 10:00 to 13:00."),
  ]);
}, 60_000);
