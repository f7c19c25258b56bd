import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AccessToken } from "livekit-server-sdk";
import { usedMinutes } from "../../src/services/minutes.ts";
import { expectApiError } from "../helpers/errors.ts";
import { liveKitEvents } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  mintToken,
  type Seed,
  seedOrganization,
  startCall,
  startWorld,
  type WebCallWorld,
} from "./support.ts";

/**
 * The end of live web calls. LiveKit's signed webhooks move a call to ongoing when someone joins and
 * end it on room_finished; a missing or bad signature is 401 invalid_signature and changes nothing.
 * At maxSeconds the server closes the room and ends the call itself. Either way the minutes used
 * (whole minutes, at least 1) stay counted and the rest of the reservation is returned.
 */

let w: WebCallWorld;
let seed: Seed;

beforeAll(async () => {
  w = await startWorld({ timers: true });
  seed = await seedOrganization(w.ctx, { planMinutes: 1000, cap: 100 });
});
afterAll(() => w.close());

async function liveCall(): Promise<string> {
  const token = await mintToken(w.ctx, seed.liveKey, seed.agent.id, { orderId: 7 });
  const res = await startCall(w.ctx, { sessionToken: token });
  expect(res.status).toBe(201);
  return (await res.json()).callId;
}

async function deliver(event: Record<string, unknown>, opts: { secret?: string; contentType?: string } = {}) {
  const { body, headers } = await w.liveKit.signWebhook(event, opts.secret ? { secret: opts.secret } : {});
  if (opts.contentType) headers["content-type"] = opts.contentType;
  return w.ctx.request("/api/livekit/webhook", { method: "POST", body, headers });
}

async function callRow(id: string) {
  const [row] = await w.ctx.deps.sql`
    select status, started_at, ended_at, duration_seconds from calls where id = ${id}`;
  return row!;
}

async function createdAtOf(id: string): Promise<Date> {
  const [row] = await w.ctx.deps.sql<{ created_at: Date }[]>`select created_at from calls where id = ${id}`;
  return row!.created_at;
}

async function events(id: string) {
  const rows = await w.ctx.deps.sql<{ type: string; livemode: boolean }[]>`
    select type, livemode from events where data->>'id' = ${id} order by id`;
  return rows.map((r) => `${r.type} ${r.livemode}`);
}

const planUsed = () => usedMinutes(w.ctx.deps.sql, w.ctx.deps.clock, { organizationId: seed.org.id });

describe("signed webhooks", () => {
  test("participant_joined → ongoing, room_finished → completed with minutes settled; replays change nothing", async () => {
    const before = await planUsed();
    const id = await liveCall();
    expect(await planUsed()).toBe(before + 10);

    const joined = liveKitEvents.participantJoined(id, `visitor-${id}`);
    const res = await deliver(joined);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ received: true });
    const ongoing = await callRow(id);
    expect(ongoing.status).toBe("ongoing");
    expect(ongoing.started_at).toBeInstanceOf(Date);
    // The agent joining too, and LiveKit retrying, change nothing.
    expect((await deliver(liveKitEvents.participantJoined(id, "agent-1", "AGENT"))).status).toBe(200);
    expect((await deliver(joined)).status).toBe(200);
    expect((await callRow(id)).started_at).toEqual(ongoing.started_at);

    // 150 seconds of talk before the room finished (LiveKit's time of the event, in whole seconds):
    // 3 minutes stay counted, 7 of the 10 reserved go back.
    const finished = liveKitEvents.roomFinished(id);
    const finishedAt = Number(finished.createdAt) * 1000;
    await w.ctx.deps.sql`update calls set started_at = ${new Date(finishedAt - 150_000)} where id = ${id}`;
    expect((await deliver(finished, { contentType: "application/json" })).status).toBe(200);
    const done = await callRow(id);
    expect(done.status).toBe("completed");
    expect(done.ended_at).toBeInstanceOf(Date);
    // From the recorded start to the recorded end, however long the finish took to arrive.
    const [recorded] = await w.ctx.deps.sql<{ seconds: number }[]>`
      select round(extract(epoch from ended_at - started_at))::int as seconds from calls where id = ${id}`;
    expect(done.duration_seconds).toBe(recorded!.seconds);
    expect(done.ended_at.getTime()).toBe(finishedAt);
    expect(done.duration_seconds).toBe(150);
    expect(await planUsed()).toBe(before + 3);

    expect((await deliver(finished)).status).toBe(200);
    expect(await planUsed()).toBe(before + 3);
    expect(await callRow(id)).toEqual(done);
    expect(await events(id)).toEqual(["call.started true", "call.ended true"]);

    const read = await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.liveKey });
    expect(await read.json()).toMatchObject({ id, livemode: true, status: "completed", direction: "web" });
  });

  test("a webhook signed by the SDK's AccessToken, as LiveKit signs them, is accepted", async () => {
    const id = await liveCall();
    const body = JSON.stringify(liveKitEvents.participantJoined(id, "visitor"));
    const at = new AccessToken(w.liveKit.apiKey, w.liveKit.apiSecret, { ttl: "5m" });
    at.sha256 = Buffer.from(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body))).toString(
      "base64",
    );
    const res = await w.ctx.request("/api/livekit/webhook", {
      method: "POST",
      body,
      headers: { "content-type": "application/webhook+json", authorization: await at.toJwt() },
    });
    expect(res.status).toBe(200);
    expect((await callRow(id)).status).toBe("ongoing");
  });

  test("room_finished before any join was reported completes the call at that instant, one minute kept", async () => {
    const before = await planUsed();
    const id = await liveCall();
    const finished = liveKitEvents.roomFinished(id);
    expect((await deliver(finished)).status).toBe(200);
    const done = await callRow(id);
    expect(done.status).toBe("completed");
    // LiveKit's time in whole seconds, but never before the call existed.
    const createdAt = await createdAtOf(id);
    expect(done.started_at.getTime()).toBe(Math.max(Number(finished.createdAt) * 1000, createdAt.getTime()));
    expect(done.ended_at).toEqual(done.started_at);
    expect(done.duration_seconds).toBe(0);
    expect(await planUsed()).toBe(before + 1);
    expect(await events(id)).toEqual(["call.started true", "call.ended true"]);
    // A replay, and a join reported late, change nothing.
    expect((await deliver(finished)).status).toBe(200);
    expect((await deliver(liveKitEvents.participantJoined(id, `visitor-${id}`))).status).toBe(200);
    expect(await callRow(id)).toEqual(done);
    expect(await planUsed()).toBe(before + 1);
  });

  test("times far from the server's clock are not believed: a join dated 1970 and an end dated 2100 are taken at arrival", async () => {
    const before = await planUsed();
    const id = await liveCall();
    const joinedFrom = Date.now();
    const joined = await deliver({ ...liveKitEvents.participantJoined(id, `visitor-${id}`), createdAt: "1" });
    expect(joined.status).toBe(200);
    const started = await callRow(id);
    expect(started.status).toBe("ongoing");
    expect(started.started_at.getTime()).toBeGreaterThanOrEqual(joinedFrom - 1_000);
    const ended = await deliver({ ...liveKitEvents.roomFinished(id), createdAt: "4102444800" });
    expect(ended.status).toBe(200);
    const done = await callRow(id);
    expect(done.status).toBe("completed");
    expect(done.ended_at.getTime()).toBeLessThanOrEqual(Date.now());
    expect(done.duration_seconds).toBeLessThan(60);
    expect(await planUsed()).toBe(before + 1);
  });

  test("a join LiveKit dates before the call existed starts it at its creation; an end reported past maxSeconds ends it there", async () => {
    const before = await planUsed();
    const id = await liveCall();
    const createdAt = await createdAtOf(id);
    // Fifty minutes before the call (within the day LiveKit's times are believed), then twenty minutes
    // after it, for a call of at most 600 s.
    const joinedAt = Math.floor((createdAt.getTime() - 3_000_000) / 1000);
    expect(
      (
        await deliver({
          ...liveKitEvents.participantJoined(id, `visitor-${id}`),
          createdAt: String(joinedAt),
        })
      ).status,
    ).toBe(200);
    const started = await callRow(id);
    expect(started.started_at).toEqual(createdAt);
    const endedAt = Math.floor((Date.now() + 1_200_000) / 1000);
    expect((await deliver({ ...liveKitEvents.roomFinished(id), createdAt: String(endedAt) })).status).toBe(
      200,
    );
    const done = await callRow(id);
    expect(done.status).toBe("completed");
    expect(done.duration_seconds).toBe(600);
    expect(done.ended_at.getTime()).toBe(createdAt.getTime() + 600_000);
    expect(await planUsed()).toBe(before + 10);
    const read = await (await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.liveKey })).json();
    expect(Date.parse(read.startedAt)).toBeGreaterThanOrEqual(Date.parse(read.createdAt));
    expect(read.durationSeconds).toBe(600);
  });

  test("events about unknown rooms or simulated calls change nothing", async () => {
    expect((await deliver(liveKitEvents.roomFinished("call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"))).status).toBe(200);
    const token = await mintToken(w.ctx, seed.testKey, seed.agent.id);
    const sim = (await (await startCall(w.ctx, { sessionToken: token })).json()).callId;
    await w.ctx.deps.sql`update calls set status = 'ongoing', started_at = now() where id = ${sim}`;
    expect((await deliver(liveKitEvents.roomFinished(sim))).status).toBe(200);
    expect((await callRow(sim)).status).toBe("ongoing");
  });
});

describe("forged webhooks", () => {
  test.each([
    [
      "signed with another secret",
      async (e: Record<string, unknown>) => deliver(e, { secret: "x".repeat(40) }),
    ],
    [
      "without a signature",
      async (e: Record<string, unknown>) =>
        w.ctx.request("/api/livekit/webhook", {
          method: "POST",
          body: JSON.stringify(e),
          headers: { "content-type": "application/webhook+json" },
        }),
    ],
    [
      "with a signature of another body",
      async (e: Record<string, unknown>) => {
        const { headers } = await w.liveKit.signWebhook({ ...e, id: "EV_other" });
        return w.ctx.request("/api/livekit/webhook", { method: "POST", body: JSON.stringify(e), headers });
      },
    ],
  ])("%s are 401 invalid_signature and change nothing", async (_name, send) => {
    const id = await liveCall();
    const res = await send(liveKitEvents.participantJoined(id, `visitor-${id}`));
    await expectApiError(res, 401, "invalid_signature");
    expect((await callRow(id)).status).toBe("initiated");
    const finished = await send(liveKitEvents.roomFinished(id));
    expect(finished.status).toBe(401);
    expect((await callRow(id)).status).toBe("initiated");
    expect(await events(id)).toEqual([]);
  });

  test("a body correctly signed that is no event LiveKit's SDK can read is 400 invalid_request, changing nothing", async () => {
    const id = await liveCall();
    for (const createdAt of ["abc", "99999999999999999999"]) {
      const unreadable = { ...liveKitEvents.participantJoined(id, `visitor-${id}`), createdAt };
      await expectApiError(await deliver(unreadable), 400, "invalid_request");
      // The same body signed with another secret is a bad signature, as before.
      await expectApiError(await deliver(unreadable, { secret: "x".repeat(40) }), 401, "invalid_signature");
    }
    expect((await callRow(id)).status).toBe("initiated");
    expect(await events(id)).toEqual([]);
  });

  test("without LiveKit configured every webhook is 401 invalid_signature", async () => {
    const bare = await startWorld({ liveKit: false });
    try {
      const { body, headers } = await w.liveKit.signWebhook(liveKitEvents.roomFinished("call_x"));
      const res = await bare.ctx.request("/api/livekit/webhook", { method: "POST", body, headers });
      await expectApiError(res, 401, "invalid_signature");
    } finally {
      await bare.close();
    }
  });
});

describe("the maxSeconds timer", () => {
  test("deletes the room, ends the call and settles its minutes", async () => {
    const before = await planUsed();
    const id = await liveCall();
    await deliver(liveKitEvents.participantJoined(id, `visitor-${id}`));
    expect(w.liveKit.rooms.has(id)).toBe(true);
    // Bring the timer's due time (600 s away) to now; the running timer runner fires it.
    await w.ctx.deps.sql`
      update timers set due_at = now() where kind = 'webcall.max_duration' and payload->>'callId' = ${id}`;
    await waitUntil("the timer to end the call", async () => (await callRow(id)).status === "completed");
    expect(w.liveKit.rooms.has(id)).toBe(false);
    expect(
      w.liveKit.requests.some((r) => r.method === "DeleteRoom" && r.body.room === id && r.status === 200),
    ).toBe(true);
    expect(await planUsed()).toBe(before + 1);
    expect(await events(id)).toEqual(["call.started true", "call.ended true"]);
    // LiveKit's room_finished that follows changes nothing.
    await deliver(liveKitEvents.roomFinished(id));
    expect(await planUsed()).toBe(before + 1);
    expect(await events(id)).toEqual(["call.started true", "call.ended true"]);
  });

  test("does nothing to a call that already ended", async () => {
    const id = await liveCall();
    await deliver(liveKitEvents.roomFinished(id));
    const deletes = w.liveKit.requests.filter((r) => r.method === "DeleteRoom").length;
    await w.ctx.deps.sql`
      update timers set due_at = now() where kind = 'webcall.max_duration' and payload->>'callId' = ${id}`;
    await waitUntil(
      "the call's timers to be done",
      async () => (await w.ctx.deps.sql`select 1 from timers where payload->>'callId' = ${id}`).length === 0,
    );
    expect(w.liveKit.requests.filter((r) => r.method === "DeleteRoom").length).toBe(deletes);
    expect((await callRow(id)).status).toBe("completed");
  });
});

describe("the maxSeconds timer when the media server fails", () => {
  test("leaves the call running, and its safety net tries again until the room is closed", async () => {
    const id = await liveCall();
    await deliver(liveKitEvents.participantJoined(id, `visitor-${id}`));
    w.liveKit.fail("DeleteRoom");
    try {
      await w.ctx.deps.sql`
        update timers set due_at = now() where kind = 'webcall.max_duration' and payload->>'callId' = ${id}`;
      // The timer fired (outside its transaction the room could not be closed) and left a net for later.
      await waitUntil("a DeleteRoom request", () =>
        w.liveKit.requests.some((r) => r.method === "DeleteRoom" && r.body.room === id),
      );
      const nets = async () => [
        ...(await w.ctx.deps.sql<{ later: boolean }[]>`
          select due_at > now() + interval '20 seconds' as later from timers where payload->>'callId' = ${id}`),
      ];
      await waitUntil("the net for later", async () => (await nets()).some((n) => n.later));
      expect(await nets()).toEqual([{ later: true }]);
      expect((await callRow(id)).status).toBe("ongoing");
      expect(w.liveKit.rooms.has(id)).toBe(true);
    } finally {
      w.liveKit.fail("DeleteRoom", null);
    }
    await w.ctx.deps.sql`update timers set due_at = now() where payload->>'callId' = ${id}`;
    await waitUntil("the net to end the call", async () => (await callRow(id)).status === "completed");
    expect(w.liveKit.rooms.has(id)).toBe(false);
    expect((await w.ctx.deps.sql`select 1 from timers where payload->>'callId' = ${id}`).length).toBe(0);
  });
});
