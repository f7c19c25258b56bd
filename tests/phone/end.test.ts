import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { TokenVerifier } from "livekit-server-sdk";
import { answerPhoneCall } from "../../src/db/liveCallMoves.ts";
import { usedMinutes } from "../../src/services/minutes.ts";
import { TEST_DATABASE } from "../helpers/db.ts";
import { liveKitEvents } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  freshNumber,
  type PhoneSeed,
  type PhoneWorld,
  placeCall,
  seedPhoneOrganization,
  startPhoneWorld,
} from "./support.ts";

/**
 * The end of live calls: LiveKit's signed webhooks at the event's own time, the maxSeconds timer
 * (the room deleted, LiveKit asked when no end was reported), minutes settled, rooms closed.
 */

let w: PhoneWorld;
let seed: PhoneSeed;

beforeAll(async () => {
  w = await startPhoneWorld({ timers: true });
  seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 1000 }, { planMinutes: 100_000 });
});
afterAll(() => w.close());

const sql = () => w.ctx.deps.sql;
const planUsed = () => usedMinutes(sql(), w.ctx.deps.clock, { organizationId: seed.org.id });

async function deliver(event: Record<string, unknown>) {
  const { body, headers } = await w.liveKit.signWebhook(event);
  const res = await w.ctx.request("/api/livekit/webhook", { method: "POST", body, headers });
  expect(res.status).toBe(200);
}
async function row(id: string) {
  const [r] = await sql()<
    {
      status: string;
      started_at: Date | null;
      ended_at: Date | null;
      duration_seconds: number | null;
      outcome: string | null;
    }[]
  >`select status, started_at, ended_at, duration_seconds, outcome from calls where id = ${id}`;
  return r!;
}
async function events(id: string) {
  const rows = await sql()<{ type: string; status: string }[]>`
    select type, data->>'status' as status from events where data->>'id' = ${id} order by id`;
  return rows.map((r) => `${r.type} ${r.status}`);
}
async function kept(id: string) {
  const [r] =
    await sql()`select reserved_minutes, kept_minutes from minute_reservations where call_id = ${id}`;
  return r!;
}
const deletes = (id: string) =>
  w.liveKit.requests.filter((r) => r.method === "DeleteRoom" && r.body.room === id);

/** A live phone call the callee answered: `ongoing`. */
async function answered(): Promise<{ id: string; startedAt: Date }> {
  const to = freshNumber();
  w.liveKit.scriptDial(to, { kind: "answer", afterMs: 50 });
  const res = await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to });
  const id = (await res.json()).id as string;
  await waitUntil("the call to be answered", async () => (await row(id)).status === "ongoing");
  return { id, startedAt: (await row(id)).started_at! };
}

describe("a phone call's end, reported by LiveKit", () => {
  test("participant_left of sip_<call id>: completed at the event's time, minutes settled, room deleted", async () => {
    const before = await planUsed();
    const { id, startedAt } = await answered();
    expect(await planUsed()).toBe(before + 60);
    // The agent leaving changes nothing; only the callee's leaving ends a phone call.
    await deliver(liveKitEvents.participantLeft(id, `agent-${id}`, { kind: "AGENT" }));
    expect((await row(id)).status).toBe("ongoing");

    const hangUp = new Date(Math.floor(startedAt.getTime() / 1000) * 1000 + 95_000);
    const left = liveKitEvents.participantLeft(id, `sip_${id}`, { createdAt: hangUp });
    await deliver(left);
    const done = await row(id);
    expect(done.status).toBe("completed");
    expect(done.ended_at).toEqual(hangUp);
    expect(done.duration_seconds).toBe(Math.round((hangUp.getTime() - startedAt.getTime()) / 1000));
    // 94–95 s: two minutes stay counted, the other 58 of the 60 reserved go back.
    expect(await kept(id)).toEqual({ reserved_minutes: 60, kept_minutes: 2 });
    expect(await planUsed()).toBe(before + 2);
    expect(await events(id)).toEqual(["call.started ongoing", "call.ended completed"]);
    // The server closes the room: nobody can join it again.
    await waitUntil("a DeleteRoom request", () => deletes(id).length === 1);
    expect(w.liveKit.rooms.has(id)).toBe(false);

    // Replays and the room_finished that follows change nothing.
    await deliver(left);
    await deliver(liveKitEvents.roomFinished(id, { createdAt: new Date(hangUp.getTime() + 20_000) }));
    expect(await row(id)).toEqual(done);
    expect(await events(id)).toEqual(["call.started ongoing", "call.ended completed"]);
    expect(await planUsed()).toBe(before + 2);
  });

  test("room_finished ends an ongoing phone call at the event's own time", async () => {
    const { id, startedAt } = await answered();
    const finished = new Date(Math.floor(startedAt.getTime() / 1000) * 1000 + 30_000);
    await deliver(liveKitEvents.roomFinished(id, { createdAt: finished }));
    const done = await row(id);
    expect(done).toMatchObject({ status: "completed", ended_at: finished });
    expect(await kept(id)).toEqual({ reserved_minutes: 60, kept_minutes: 1 });
  });

  test("an event dated before the answer: endedAt is startedAt, durationSeconds 0, one minute kept", async () => {
    const { id, startedAt } = await answered();
    await deliver(
      liveKitEvents.participantLeft(id, `sip_${id}`, { createdAt: new Date(startedAt.getTime() - 5000) }),
    );
    const done = await row(id);
    expect(done).toMatchObject({ status: "completed", ended_at: startedAt, duration_seconds: 0 });
    expect(await kept(id)).toEqual({ reserved_minutes: 60, kept_minutes: 1 });
  });

  test("an event time far from the server's clock (a signed sender's nonsense) is not believed: the arrival's is", async () => {
    for (const createdAt of [99_999_999_999_999, 253_402_300_800, 1]) {
      const { id, startedAt } = await answered();
      const before = Date.now();
      await deliver({ ...liveKitEvents.roomFinished(id), createdAt: String(createdAt) });
      const done = await row(id);
      expect(done.status).toBe("completed");
      expect(done.ended_at!.getTime()).toBeGreaterThanOrEqual(Math.max(before - 1_000, startedAt.getTime()));
      expect(done.ended_at!.getTime()).toBeLessThanOrEqual(Date.now());
      expect(await kept(id)).toEqual({ reserved_minutes: 60, kept_minutes: 1 });
    }
    // The service goes on answering (web calls: tests/webcalls/webhook.test.ts).
    const res = await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() });
    expect(res.status).toBe(201);
  });

  test("answered and hung up before the answer is written: completed at once, one minute kept, room closed", async () => {
    const to = freshNumber();
    const seen: { status: string; webhook: number }[] = [];
    w.liveKit.scriptDial(to, {
      kind: "answer",
      afterMs: 50,
      // LiveKit's participant_left reaches the service while the call is still ringing there.
      hangUpBeforeAnswer: async ({ body, headers }) => {
        const id = JSON.parse(body).room.name as string;
        const status = (await row(id)).status;
        const res = await w.ctx.request("/api/livekit/webhook", { method: "POST", body, headers });
        seen.push({ status, webhook: res.status });
      },
    });
    const before = await planUsed();
    const id = (await (await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to })).json()).id;
    await waitUntil("the call to complete", async () => (await row(id)).status === "completed");
    expect(seen).toEqual([{ status: "ringing", webhook: 200 }]);
    const done = await row(id);
    // The hang-up is dated before the answer was written: endedAt is startedAt.
    expect(done.started_at).not.toBeNull();
    expect(done).toMatchObject({ ended_at: done.started_at, duration_seconds: 0 });
    expect(await kept(id)).toEqual({ reserved_minutes: 60, kept_minutes: 1 });
    expect(await planUsed()).toBe(before + 1);
    expect(await events(id)).toEqual(["call.started ongoing", "call.ended completed"]);
    // Nothing keeps it running: no maxSeconds timer, no net; the room is closed.
    expect((await sql()`select kind from timers where payload->>'callId' = ${id}`).length).toBe(0);
    await waitUntil("the room to close", () => !w.liveKit.rooms.has(id));
    expect(w.liveKit.dialCount(`sip_${id}`)).toBe(1);
  });

  test.skipIf(TEST_DATABASE !== "postgres")(
    "the answer committing while the hang-up is being kept: the hang-up then ends the call it answered",
    async () => {
      const id = w.ctx.deps.ids.next("call");
      await sql()`
        insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at,
          updated_at)
        values (${id}, ${seed.org.id}, true, 'ringing', ${seed.agent.id}, ${freshNumber()}, 'outbound', now(), now(),
          now())`;
      await sql()`
        insert into minute_reservations (call_id, organization_id, plan_charged, month, reserved_minutes, max_seconds, created_at)
        values (${id}, ${seed.org.id}, true, date_trunc('month', now())::date, 60, 3600, now())`;
      // The answer is written and not yet committed, its row lock held.
      let commit = () => {};
      let written = () => {};
      const answerWritten = new Promise<void>((r) => {
        written = r;
      });
      const answer = sql().begin(async (tx) => {
        await answerPhoneCall(tx, id, new Date(), new Date());
        written();
        await new Promise<void>((r) => {
          commit = r;
        });
      });
      await answerWritten;
      // LiveKit's report arrives: it saw the call ringing and waits on the answer's lock to keep the end.
      let delivered: Promise<void> = Promise.resolve();
      try {
        delivered = deliver(liveKitEvents.participantLeft(id, `sip_${id}`));
        await waitUntil(
          "the report to wait on the answer's lock",
          async () =>
            (
              await sql()`select 1 from pg_locks l join pg_stat_activity a on a.pid = l.pid
                where not l.granted and a.datname = current_database()`
            ).length > 0,
          { stepMs: 5 },
        );
      } finally {
        commit();
      }
      await answer;
      await delivered;
      const done = await sql()<{ status: string; hung_up_while_ringing_at: Date | null }[]>`
        select status, hung_up_while_ringing_at from calls where id = ${id}`;
      expect(done[0]).toEqual({ status: "completed", hung_up_while_ringing_at: null });
      expect(await kept(id)).toEqual({ reserved_minutes: 60, kept_minutes: 1 });
      expect(await events(id)).toEqual(["call.ended completed"]);
    },
  );

  test("a hang-up reported while ringing does not end a dial that then fails: busy, nothing kept", async () => {
    const to = freshNumber();
    w.liveKit.scriptDial(to, { kind: "hang" });
    const id = (await (await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to })).json()).id;
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${id}`) === 1);
    await deliver(liveKitEvents.participantLeft(id, `sip_${id}`));
    expect((await row(id)).status).toBe("ringing");
    w.liveKit.releaseDials({ kind: "sip_error", sipStatus: 603 });
    await waitUntil("the busy end", async () => (await row(id)).status === "busy");
    expect(await kept(id)).toEqual({ reserved_minutes: 60, kept_minutes: 0 });
    expect(await events(id)).toEqual(["call.ended busy"]);
  });

  test("while it rings, the agent joining does not start it, nor does a SIP participant leaving end it", async () => {
    const to = freshNumber();
    w.liveKit.scriptDial(to, { kind: "hang" });
    const id = (await (await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to })).json()).id;
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${id}`) === 1);
    await deliver(liveKitEvents.participantJoined(id, `agent-${id}`, "AGENT"));
    await deliver(liveKitEvents.participantJoined(id, `sip_${id}`, "SIP"));
    expect((await row(id)).status).toBe("ringing");
    await deliver(liveKitEvents.participantLeft(id, `sip_${id}`));
    expect((await row(id)).status).toBe("ringing");
    // The dial's own answer decides.
    w.liveKit.releaseDials({ kind: "sip_error", sipStatus: 486 });
    await waitUntil("the busy end", async () => (await row(id)).status === "busy");
  });
});

describe("a phone call at maxSeconds", () => {
  async function dueNow(id: string) {
    await sql()`update timers set due_at = now() where kind = 'webcall.max_duration' and payload->>'callId' = ${id}`;
  }

  test("the callee still on the line: LiveKit asked, the room deleted, completed; no warning", async () => {
    const { id } = await answered();
    const logged = w.ctx.logs.length;
    await dueNow(id);
    await waitUntil("the call to complete", async () => (await row(id)).status === "completed");
    const methods = w.liveKit.requests.filter((r) => r.body.room === id).map((r) => r.method);
    expect(methods.slice(-2)).toEqual(["ListParticipants", "DeleteRoom"]);
    expect(w.liveKit.rooms.has(id)).toBe(false);
    expect(await events(id)).toEqual(["call.started ongoing", "call.ended completed"]);
    expect(w.ctx.logs.slice(logged).some((l) => l.includes("/api/livekit/webhook"))).toBe(false);
    expect((await sql()`select 1 from timers where payload->>'callId' = ${id}`).length).toBe(0);
  });

  test("the callee gone but no end reported: completed at maxSeconds, and a warning names the webhook", async () => {
    const { id } = await answered();
    w.liveKit.rooms.get(id)!.participants.delete(`sip_${id}`);
    const logged = w.ctx.logs.length;
    await dueNow(id);
    await waitUntil("the call to complete", async () => (await row(id)).status === "completed");
    const warning = w.ctx.logs.slice(logged).find((l) => l.includes("/api/livekit/webhook"));
    expect(warning).toBeDefined();
    expect(JSON.parse(warning!)).toMatchObject({ level: "warn", callId: id });
  });
});

describe("a web call whose end LiveKit never reports (no webhook configured)", () => {
  async function webCall(planMinutes: number) {
    const org = await seedPhoneOrganization(w.ctx, {}, { planMinutes });
    const mint = await w.ctx.request("/api/v1/web-call-sessions", {
      method: "POST",
      key: org.liveKey,
      json: { agentId: org.agent.id },
    });
    const { token } = await mint.json();
    const res = await w.ctx.request("/api/v1/web-calls", {
      method: "POST",
      json: { sessionToken: token },
      remoteAddress: `203.0.113.${Math.floor(Math.random() * 250) + 1}`,
    });
    expect(res.status).toBe(201);
    return { org, answer: await res.json() };
  }
  async function maxSecondsNow(id: string) {
    await sql()`update timers set due_at = now() where kind = 'webcall.max_duration' and payload->>'callId' = ${id}`;
  }

  test("the participant token lives min(600, maxSeconds + 60) s", async () => {
    const { answer } = await webCall(3);
    expect(answer.maxSeconds).toBe(180);
    const claims = (await new TokenVerifier(w.liveKit.apiKey, w.liveKit.apiSecret).verify(
      answer.room.participantToken,
    )) as { exp: number; nbf: number };
    expect(claims.exp - claims.nbf).toBe(240);
  });

  test("its room closed by LiveKit before maxSeconds (someone came and left): failed end_not_reported, every reserved minute kept, a warning", async () => {
    const { org, answer } = await webCall(1000);
    const used = () => usedMinutes(sql(), w.ctx.deps.clock, { organizationId: org.org.id });
    expect(await used()).toBe(10);
    // LiveKit closes a room 20 s after its last participant left.
    w.liveKit.rooms.delete(answer.callId);
    const logged = w.ctx.logs.length;
    await maxSecondsNow(answer.callId);
    await waitUntil("the call to fail", async () => (await row(answer.callId)).status === "failed");
    expect(await row(answer.callId)).toMatchObject({ outcome: "end_not_reported" });
    expect(await kept(answer.callId)).toEqual({ reserved_minutes: 10, kept_minutes: 10 });
    expect(await used()).toBe(10);
    expect(w.liveKit.rooms.has(answer.callId)).toBe(false);
    expect(deletes(answer.callId).length).toBe(1);
    expect(w.ctx.logs.slice(logged).some((l) => l.includes("/api/livekit/webhook"))).toBe(true);
  });

  test("maxSeconds under the empty timeout, nobody ever joined (the room open and empty): no_answer, nothing kept, no warning", async () => {
    // One plan minute: maxSeconds 60, before LiveKit's 120 s empty timeout could close the room.
    const { org, answer } = await webCall(1);
    expect(answer.maxSeconds).toBe(60);
    const used = () => usedMinutes(sql(), w.ctx.deps.clock, { organizationId: org.org.id });
    expect(await used()).toBe(1);
    const logged = w.ctx.logs.length;
    await maxSecondsNow(answer.callId);
    await waitUntil("the call to end", async () => (await row(answer.callId)).status !== "initiated");
    expect(await row(answer.callId)).toMatchObject({ status: "no_answer", outcome: null, started_at: null });
    expect(await kept(answer.callId)).toEqual({ reserved_minutes: 1, kept_minutes: 0 });
    expect(await used()).toBe(0);
    expect(await events(answer.callId)).toEqual(["call.ended no_answer"]);
    expect(w.liveKit.rooms.has(answer.callId)).toBe(false);
    const asked = w.liveKit.requests.filter(
      (r) => r.body.room === answer.callId || (r.body.names as string[] | undefined)?.includes(answer.callId),
    );
    expect(asked.map((r) => r.method)).toEqual([
      "CreateDispatch",
      "ListParticipants",
      "ListRooms",
      "DeleteRoom",
    ]);
    expect(w.ctx.logs.slice(logged).some((l) => l.includes("/api/livekit/webhook"))).toBe(false);
  });

  test("an empty room older than its empty timeout was joined and left meanwhile: end_not_reported, minutes kept", async () => {
    const { answer } = await webCall(1);
    // Open 130 s: a room nobody joined would have closed at 120 s; this one's last participant left under 20 s ago.
    w.liveKit.rooms.get(answer.callId)!.creationTime -= 130;
    const logged = w.ctx.logs.length;
    await maxSecondsNow(answer.callId);
    await waitUntil("the call to end", async () => (await row(answer.callId)).status !== "initiated");
    expect(await row(answer.callId)).toMatchObject({ status: "failed", outcome: "end_not_reported" });
    expect(await kept(answer.callId)).toEqual({ reserved_minutes: 1, kept_minutes: 1 });
    expect(w.ctx.logs.slice(logged).some((l) => l.includes("/api/livekit/webhook"))).toBe(true);
  });

  test("the visitor still in the room: started when it joined, completed at maxSeconds", async () => {
    const { answer } = await webCall(1000);
    // Made 140 s ago, joined 10 s later.
    await sql()`update calls set created_at = created_at - interval '140 seconds' where id = ${answer.callId}`;
    const visitor = w.liveKit.addParticipant(answer.callId, { identity: `visitor-${answer.callId}` });
    visitor.joinedAt = Math.floor(Date.now() / 1000) - 130;
    await maxSecondsNow(answer.callId);
    await waitUntil("the call to complete", async () => (await row(answer.callId)).status === "completed");
    const done = await row(answer.callId);
    expect(done.started_at).toEqual(new Date(visitor.joinedAt * 1000));
    expect(done.duration_seconds).toBeGreaterThanOrEqual(129);
    expect(done.duration_seconds).toBeLessThanOrEqual(135);
    expect(await kept(answer.callId)).toEqual({ reserved_minutes: 10, kept_minutes: 3 });
    expect(await events(answer.callId)).toEqual(["call.started ongoing", "call.ended completed"]);
  });
});
