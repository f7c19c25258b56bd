import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectApiError } from "../helpers/errors.ts";
import { type FakeLiveKit, liveKitEvents, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { freshAddress, requestFrom, type Seed, type Server, seed, startServer } from "./support.ts";

/**
 * What a dispatched voice agent does over HTTP, on the runtime and database under test: it searches
 * its knowledge bases, and reports the results of its live call, whose events come once the call ended.
 */

let server: Server;
let liveKit: FakeLiveKit;
let s: Seed;
beforeAll(async () => {
  liveKit = await startFakeLiveKit();
  server = await startServer({ env: liveKit.env });
  s = await seed(server);
});
afterAll(async () => {
  await server.stop();
  await liveKit.close();
});

describe("knowledge search", () => {
  test("a document's chunks are found by their words, Chinese ones too; a NUL in q is 400 invalid_query", async () => {
    const kb = await server.admin<{ id: string }>("POST", `/organizations/${s.org.id}/knowledge-bases`, {
      name: "Shop",
      language: "en",
    });
    const upload = async (title: string, text: string) => {
      const res = await server.fetch(`/api/v1/knowledge-bases/${kb.id}/documents`, {
        method: "POST",
        key: s.liveKey,
        json: { title, text },
      });
      expect(res.status).toBe(201);
      return (await res.json()).documentId as string;
    };
    const hours = await upload("Hours", "We are open Monday to Friday.\n\nOn Saturdays we open at ten.");
    const returns = await upload("退货", "说明退货政策。商品可在三十天内退货。");
    const search = async (q: string, key = s.liveKey) =>
      server.fetch(`/api/v1/knowledge-bases/${kb.id}/search?q=${encodeURIComponent(q)}&limit=3`, { key });

    const res = await search("opening on Saturday");
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.livemode).toBe(true);
    expect(body.results.map((r: { documentId: string }) => r.documentId)).toEqual([hours]);
    expect(body.results[0]).toMatchObject({ title: "Hours", chunkIndex: 0 });
    expect(body.results[0].text).toContain("On Saturdays we open at ten.");

    const cjk = await (await search("怎么退货")).json();
    expect(cjk.results.map((r: { documentId: string }) => r.documentId)).toEqual([returns]);
    expect(await (await search("Saturday", s.testKey)).json()).toEqual({ livemode: false, results: [] });
    const nul = await server.fetch(`/api/v1/knowledge-bases/${kb.id}/search?q=a%00b`, { key: s.liveKey });
    await expectApiError(nul, 400, "invalid_query", { param: "q" });
  });
});

describe("results of a live call", () => {
  async function deliver(event: Record<string, unknown>) {
    const { body, headers } = await liveKit.signWebhook(event);
    const res = await server.fetch("/api/livekit/webhook", { method: "POST", body, headers });
    expect(res.status).toBe(200);
  }
  async function eventTypes(callId: string): Promise<string[]> {
    const res = await server.fetch("/api/v1/events?limit=100", { key: s.liveKey });
    const { data } = (await res.json()) as {
      data: { type: string; data: { id?: string; callId?: string } }[];
    };
    return data
      .filter((e) => e.data.id === callId || e.data.callId === callId)
      .map((e) => e.type)
      .reverse();
  }

  test("reported while ongoing: 200 with the call; the events and the transcript come once, at the end", async () => {
    const mint = await server.fetch("/api/v1/web-call-sessions", {
      method: "POST",
      key: s.liveKey,
      json: { agentId: s.agent.id },
    });
    const { token } = await mint.json();
    const started = await requestFrom(freshAddress(), `${server.url}/api/v1/web-calls`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: "https://shop.example.com" },
      body: JSON.stringify({ sessionToken: token }),
    });
    expect(started.status).toBe(201);
    const { callId } = await started.json();
    await deliver(liveKitEvents.participantJoined(callId, `visitor-${callId}`));

    const segments = [
      { speaker: "agent", text: "Hello, Acme shop.", offsetSeconds: 0.5 },
      { speaker: "contact", text: "Are you open on Saturday?", offsetSeconds: 2 },
    ];
    const report = (json: unknown) =>
      server.fetch(`/api/v1/calls/${callId}/results`, { method: "POST", key: s.liveKey, json });
    const res = await report({ transcript: segments, summary: "Asked about Saturday.", successful: true });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      id: callId,
      status: "ongoing",
      summary: "Asked about Saturday.",
      successful: true,
    });
    expect(await eventTypes(callId)).toEqual(["call.started"]);
    await expectApiError(
      await server.fetch(`/api/v1/calls/${callId}/transcript`, { key: s.liveKey }),
      404,
      "not_found",
    );

    await deliver(liveKitEvents.roomFinished(callId));
    expect(await eventTypes(callId)).toEqual([
      "call.started",
      "call.ended",
      "call.transcript_ready",
      "call.analysis_ready",
    ]);
    const transcript = await server.fetch(`/api/v1/calls/${callId}/transcript`, { key: s.liveKey });
    const call = await (await server.fetch(`/api/v1/calls/${callId}`, { key: s.liveKey })).json();
    expect(await transcript.json()).toEqual({ callId, livemode: true, segments, updatedAt: call.updatedAt });
    await expectApiError(await report({ summary: "again" }), 409, "results_already_reported");
    await deliver(liveKitEvents.roomFinished(callId));
    expect(await eventTypes(callId)).toHaveLength(4);
  });
});
