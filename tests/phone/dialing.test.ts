import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { usedMinutes } from "../../src/services/minutes.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import type { DialScript } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  CALLER,
  freshNumber,
  type PhoneSeed,
  type PhoneWorld,
  placeCall,
  seedPhoneOrganization,
  startPhoneWorld,
  TRUNK,
} from "./support.ts";

/**
 * Dialling a placed call from its timer: the requests LiveKit gets and their order, each SIP outcome,
 * the call's statuses and events, minutes, the room closed after a failure, and the safety net.
 */

let w: PhoneWorld;
let seed: PhoneSeed;

beforeAll(async () => {
  w = await startPhoneWorld({ timers: true });
  seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 1000 }, { planMinutes: 100_000 });
});
afterAll(() => w.close());

async function call(id: string) {
  return (await (await w.ctx.request(`/api/v1/calls/${id}`, { key: seed.liveKey })).json()) as Record<
    string,
    unknown
  >;
}
async function events(id: string) {
  const rows = await w.ctx.deps.sql<{ type: string; livemode: boolean; status: string }[]>`
    select type, livemode, data->>'status' as status from events where data->>'id' = ${id} order by id`;
  return rows.map((r) => `${r.type} ${r.livemode} ${r.status}`);
}
async function timersOf(id: string) {
  const rows = await w.ctx.deps.sql<{ kind: string }[]>`
    select kind from timers where payload->>'callId' = ${id} order by id`;
  return rows.map((r) => r.kind);
}
const planUsed = () => usedMinutes(w.ctx.deps.sql, w.ctx.deps.clock, { organizationId: seed.org.id });
const requestsFor = (id: string) =>
  w.liveKit.requests.filter(
    (r) => r.body.name === id || r.body.room === id || r.body.roomName === id || r.body.room_name === id,
  );

async function place(to: string, variables: Record<string, unknown> = {}) {
  const res = await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to, variables });
  expect(res.status).toBe(201);
  return { id: (await res.json()).id as string, placedAt: performance.now() };
}

async function settled(id: string, statuses: string[]) {
  let last: Record<string, unknown> = {};
  await waitUntil("the call to settle", async () => {
    last = await call(id);
    return statuses.includes(String(last.status));
  });
  return last;
}

describe("an answered call", () => {
  test("CreateRoom, CreateDispatch, CreateSIPParticipant in that order within 2 s; ringing, then ongoing", async () => {
    const to = freshNumber();
    // Answered 3 s after the dial: long enough that the call is surely still ringing when read.
    w.liveKit.scriptDial(to, { kind: "answer", afterMs: 3_000 });
    const before = await planUsed();
    const { id, placedAt } = await place(to, { firstName: "Claire" });
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${id}`) === 1, { stepMs: 5 });
    expect(w.liveKit.dials.find((d) => d.identity === `sip_${id}`)!.at - placedAt).toBeLessThan(2000);
    expect((await call(id)).status).toBe("ringing");

    const done = await settled(id, ["ongoing"]);
    expect(done.startedAt).toEqual(expect.any(String));
    expect(done.endedAt).toBeNull();
    const steps = requestsFor(id).map((r) => r.method);
    expect(steps).toEqual(["CreateRoom", "CreateDispatch", "CreateSIPParticipant"]);
    const [room, dispatch, sip] = requestsFor(id);
    expect(JSON.parse(String(room!.body.metadata))).toEqual({ callId: id });
    expect(sip!.body).toMatchObject({ participantIdentity: `sip_${id}`, waitUntilAnswered: true });
    expect(dispatch!.body.agentName).toBe(seed.agent.id);
    expect(JSON.parse(String(dispatch!.body.metadata))).toEqual({
      callId: id,
      variables: { firstName: "Claire" },
      direction: "outbound",
      to,
    });
    const dial = w.liveKit.dials.find((d) => d.identity === `sip_${id}`)!;
    expect(dial).toMatchObject({
      room: id,
      to,
      from: CALLER,
      trunkId: TRUNK,
      ringingTimeoutSeconds: 30,
      maxCallDurationSeconds: 3600,
      waitUntilAnswered: true,
    });
    expect(await events(id)).toEqual(["call.started true ongoing"]);
    // The net went with the answer; the maxSeconds timer counts from the answer.
    expect(await timersOf(id)).toEqual(["webcall.max_duration"]);
    const [t] = await w.ctx.deps.sql<{ due: Date; started: Date }[]>`
      select t.due_at as due, c.started_at as started from timers t join calls c on c.id = t.payload->>'callId'
      where t.payload->>'callId' = ${id}`;
    expect(t!.due.getTime() - t!.started.getTime()).toBe(3600 * 1000);
    // Reserved (60 minutes) while it runs.
    expect(await planUsed()).toBe(before + 60);
    expect(w.liveKit.dialCount(`sip_${id}`)).toBe(1);
  });

  test("the organization's own trunk and caller number, and the agent's LiveKit name", async () => {
    const own = await seedPhoneOrganization(w.ctx, { sipTrunkId: "ST_own", callerNumber: "+3225550000" });
    const { updateAgent } = await import("../../src/services/agents.ts");
    await updateAgent(w.ctx.deps, own.agent.id, { livekitAgentName: "reception-bot" });
    const to = freshNumber();
    const res = await placeCall(w.ctx, own.liveKey, { agentId: own.agent.id, to });
    const id = (await res.json()).id;
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${id}`) === 1, { stepMs: 5 });
    expect(w.liveKit.dials.find((d) => d.identity === `sip_${id}`)).toMatchObject({
      trunkId: "ST_own",
      from: "+3225550000",
    });
    expect(w.liveKit.dispatches.find((d) => d.room === id)!.agentName).toBe("reception-bot");
  });
});

describe("each SIP outcome", () => {
  test.each<[string, DialScript, string, string | null]>([
    ["486 Busy Here", { kind: "sip_error", sipStatus: 486 }, "busy", null],
    ["600 Busy Everywhere", { kind: "sip_error", sipStatus: 600 }, "busy", null],
    ["603 Decline", { kind: "sip_error", sipStatus: 603 }, "busy", null],
    ["408 Request Timeout", { kind: "sip_error", sipStatus: 408 }, "no_answer", null],
    ["480 Temporarily Unavailable", { kind: "sip_error", sipStatus: 480 }, "no_answer", null],
    ["487 Request Terminated", { kind: "sip_error", sipStatus: 487 }, "no_answer", null],
    ["the ringing timeout", { kind: "ring_timeout" }, "no_answer", null],
    [
      "the ringing timeout as Twirp deadline_exceeded",
      { kind: "error", status: 408, code: "deadline_exceeded", msg: "sip request timed out", afterMs: 50 },
      "no_answer",
      null,
    ],
    [
      "the ringing timeout as an older LiveKit SIP's bare canceled",
      { kind: "error", status: 408, code: "canceled", msg: "canceled", afterMs: 50 },
      "no_answer",
      null,
    ],
    ["503 Service Unavailable", { kind: "sip_error", sipStatus: 503 }, "failed", "503"],
    ["404 Not Found", { kind: "sip_error", sipStatus: 404 }, "failed", "404"],
    [
      "a Twirp error without SIP status",
      { kind: "error", status: 503, code: "unavailable" },
      "failed",
      "unavailable",
    ],
    [
      "an unknown trunk",
      { kind: "error", status: 404, code: "not_found", msg: "trunk not found" },
      "failed",
      "not_found",
    ],
  ])(
    "%s → %s (outcome %s): endedAt, no minute kept, call.ended, the room closed",
    async (_n, script, status, outcome) => {
      const to = freshNumber();
      w.liveKit.scriptDial(to, script);
      const before = await planUsed();
      const { id } = await place(to);
      const done = await settled(id, ["busy", "no_answer", "failed"]);
      expect(done).toMatchObject({
        status,
        outcome,
        startedAt: null,
        durationSeconds: null,
        successful: false,
      });
      expect(done.endedAt).toEqual(expect.any(String));
      expect(await events(id)).toEqual([`call.ended true ${status}`]);
      expect(await planUsed()).toBe(before);
      const [reservation] = await w.ctx.deps
        .sql`select kept_minutes from minute_reservations where call_id = ${id}`;
      expect(reservation!.kept_minutes).toBe(0);
      await waitUntil("the room to close", () => !w.liveKit.rooms.has(id));
      // LiveKit's deadline passing (no SIP status): it is asked whether the callee connected just before.
      const asked = script.kind === "error" && script.code === "deadline_exceeded";
      expect(requestsFor(id).map((r) => r.method)).toEqual([
        "CreateRoom",
        "CreateDispatch",
        "CreateSIPParticipant",
        ...(asked ? ["ListParticipants"] : []),
        "DeleteRoom",
      ]);
      expect(await timersOf(id)).toEqual([]);
      expect(w.liveKit.dialCount(`sip_${id}`)).toBe(1);
    },
  );

  test("the media server failing before the dial: failed with LiveKit's code, never dialled", async () => {
    w.liveKit.fail("CreateDispatch");
    try {
      const { id } = await place(freshNumber());
      const done = await settled(id, ["failed"]);
      expect(done.outcome).toBe("internal");
      expect(w.liveKit.dialCount(`sip_${id}`)).toBe(0);
      await waitUntil("the room to close", () => !w.liveKit.rooms.has(id));
    } finally {
      w.liveKit.fail("CreateDispatch", null);
    }
  });

  test("a dropped connection: LiveKit is asked; the callee not there → room closed, failed network_error", async () => {
    const to = freshNumber();
    w.liveKit.scriptDial(to, { kind: "drop", afterMs: 100 });
    const { id } = await place(to);
    const done = await settled(id, ["failed"]);
    expect(done.outcome).toBe("network_error");
    expect(requestsFor(id).map((r) => r.method)).toEqual([
      "CreateRoom",
      "CreateDispatch",
      "CreateSIPParticipant",
      "ListParticipants",
      "DeleteRoom",
    ]);
    expect(w.liveKit.dialCount(`sip_${id}`)).toBe(1);
  });

  test("the carrier removed between the 201 and the dial: failed carrier_unavailable, never dialled", async () => {
    const trunk = w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID;
    w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID = undefined;
    try {
      // A call placed while the trunk was there, whose dial timer fires now that it is gone.
      const id = w.ctx.deps.ids.next("call");
      const sql = w.ctx.deps.sql;
      await sql`
        insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at,
          updated_at)
        values (${id}, ${seed.org.id}, true, 'initiated', ${seed.agent.id}, ${freshNumber()}, 'outbound', now(), now(),
          now())`;
      await sql`
        insert into minute_reservations (call_id, organization_id, plan_charged, month, reserved_minutes, max_seconds, created_at)
        values (${id}, ${seed.org.id}, true, date_trunc('month', now())::date, 0, 120, now())`;
      await sql`insert into timers (kind, due_at, payload) values ('call.dial', now(), ${sql.json({ callId: id })})`;
      const done = await settled(id, ["failed"]);
      expect(done.outcome).toBe("carrier_unavailable");
      expect(await events(id)).toEqual(["call.ended true failed"]);
      expect(w.liveKit.dialCount(`sip_${id}`)).toBe(0);
    } finally {
      w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID = trunk;
    }
  });
});

describe("a call without a minute reservation", () => {
  test("ends failed internal_error when its dial timer fires: never dialled, never left ringing", async () => {
    const id = w.ctx.deps.ids.next("call");
    const sql = w.ctx.deps.sql;
    // Placed (initiated, with its dial timer), but its reservation is missing.
    await sql`
      insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at,
        updated_at)
      values (${id}, ${seed.org.id}, true, 'initiated', ${seed.agent.id}, ${freshNumber()}, 'outbound', now(), now(),
        now())`;
    await sql`insert into timers (kind, due_at, payload) values ('call.dial', now(), ${sql.json({ callId: id })})`;
    const done = await settled(id, ["failed", "ringing", "ongoing"]);
    expect(done).toMatchObject({ status: "failed", outcome: "internal_error", startedAt: null });
    expect(await events(id)).toEqual(["call.ended true failed"]);
    // No safety net, no maxSeconds timer: nothing is left to fire for it.
    expect(await timersOf(id)).toEqual([]);
    await Bun.sleep(200);
    expect(w.liveKit.dialCount(`sip_${id}`)).toBe(0);
    expect(requestsFor(id)).toEqual([]);
    expect(w.ctx.logs.some((l) => l.includes(id) && l.includes("without a minute reservation"))).toBe(true);
  });
});

describe("never dialled twice", () => {
  test("a repeated dial timer for a call already ringing or answered dials nobody", async () => {
    const to = freshNumber();
    w.liveKit.scriptDial(to, { kind: "answer", afterMs: 300 });
    const { id } = await place(to);
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${id}`) === 1, { stepMs: 5 });
    await w.ctx.deps
      .sql`insert into timers (kind, due_at, payload) values ('call.dial', now(), ${w.ctx.deps.sql.json({ callId: id })})`;
    await settled(id, ["ongoing"]);
    await waitUntil("the repeated dial timer to fire", async () =>
      (await timersOf(id)).every((k) => k !== "call.dial"),
    );
    await Bun.sleep(200);
    expect(w.liveKit.dialCount(`sip_${id}`)).toBe(1);
  });
});

describe("the safety net", () => {
  test("while the dial is under way here it only moves itself later; the answer then drops it", async () => {
    const to = freshNumber();
    w.liveKit.scriptDial(to, { kind: "hang" });
    const { id } = await place(to);
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${id}`) === 1, { stepMs: 5 });
    const [net] = await w.ctx.deps.sql<{ id: string }[]>`
      select id::text from timers where kind = 'call.dial_check' and payload->>'callId' = ${id}`;
    // Due now, and out of the runner's hands (it holds its nets), so that its next poll takes it at once.
    await w.ctx.deps.sql`update timers set due_at = now(), locked_by = null where id = ${net!.id}::bigint`;
    // The net fired, found the dial under way, and wrote its successor.
    await waitUntil("the net's successor", async () => {
      const rows = await w.ctx.deps.sql<{ id: string }[]>`
        select id::text from timers where kind = 'call.dial_check' and payload->>'callId' = ${id}`;
      return rows.length === 1 && rows[0]!.id !== net!.id;
    });
    expect((await call(id)).status).toBe("ringing");
    expect(requestsFor(id).map((r) => r.method)).toEqual([
      "CreateRoom",
      "CreateDispatch",
      "CreateSIPParticipant",
    ]);

    w.liveKit.releaseDials({ kind: "answer" });
    await settled(id, ["ongoing"]);
    expect(await timersOf(id)).toEqual(["webcall.max_duration"]);
    expect(w.liveKit.dialCount(`sip_${id}`)).toBe(1);
  });

  /** A call left `ringing` with nobody dialling it, as a crash leaves it, and its net due now. */
  async function leftRinging(): Promise<string> {
    const id = w.ctx.deps.ids.next("call");
    const sql = w.ctx.deps.sql;
    await sql`
      insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at,
        updated_at)
      values (${id}, ${seed.org.id}, true, 'ringing', ${seed.agent.id}, ${freshNumber()}, 'outbound', now(), now(), now())`;
    await sql`
      insert into minute_reservations (call_id, organization_id, plan_charged, month, reserved_minutes, max_seconds, created_at)
      values (${id}, ${seed.org.id}, true, date_trunc('month', now())::date, 0, 120, now())`;
    await sql`insert into timers (kind, due_at, payload) values ('call.dial_check', now(), ${sql.json({ callId: id })})`;
    return id;
  }

  test("the callee connected: ongoing, call.started, the maxSeconds timer; nobody dialled", async () => {
    const id = await leftRinging();
    w.liveKit.addParticipant(id, {
      identity: `sip_${id}`,
      kind: "SIP",
      attributes: { "sip.callStatus": "active" },
    });
    const done = await settled(id, ["ongoing"]);
    expect(done.startedAt).toEqual(expect.any(String));
    expect(await events(id)).toEqual(["call.started true ongoing"]);
    expect(await timersOf(id)).toEqual(["webcall.max_duration"]);
    expect(requestsFor(id).map((r) => r.method)).toEqual(["ListParticipants"]);
    expect(w.liveKit.dialCount(`sip_${id}`)).toBe(0);
  });

  test("the callee still ringing, or gone: the room is deleted, failed interrupted; nobody dialled", async () => {
    for (const attributes of [{ "sip.callStatus": "ringing" }, null]) {
      const id = await leftRinging();
      if (attributes) w.liveKit.addParticipant(id, { identity: `sip_${id}`, kind: "SIP", attributes });
      const done = await settled(id, ["failed"]);
      expect(done.outcome).toBe("interrupted");
      expect(await events(id)).toEqual(["call.ended true failed"]);
      expect(w.liveKit.rooms.has(id)).toBe(false);
      expect(requestsFor(id).map((r) => r.method)).toEqual(["ListParticipants", "DeleteRoom"]);
      expect(await timersOf(id)).toEqual([]);
      expect(w.liveKit.dialCount(`sip_${id}`)).toBe(0);
    }
  });

  test("LiveKit unreachable: the call stays ringing and the net looks again later", async () => {
    w.liveKit.fail("ListParticipants");
    try {
      const id = await leftRinging();
      await waitUntil("a ListParticipants request", () =>
        requestsFor(id).some((r) => r.method === "ListParticipants"),
      );
      // The net's failed look commits a later look; the call is left as it was.
      await waitUntil("the net to look again later", async () => {
        const [retry] = await w.ctx.deps.sql<{ later: boolean }[]>`
          select due_at > now() + interval '20 seconds' as later from timers
          where kind = 'call.dial_check' and payload->>'callId' = ${id}`;
        return retry?.later;
      });
      expect((await call(id)).status).toBe("ringing");
      w.liveKit.fail("ListParticipants", null);
      await w.ctx.deps.sql`
        update timers set due_at = now(), locked_by = null where kind = 'call.dial_check' and payload->>'callId' = ${id}`;
      expect((await settled(id, ["failed"])).outcome).toBe("interrupted");
    } finally {
      w.liveKit.fail("ListParticipants", null);
    }
  });
});

describe("an answered call's minutes", () => {
  test("an organization with 2 minutes left: maxSeconds 120 is LiveKit's max_call_duration", async () => {
    const small = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 2 });
    await updateOrganization(w.ctx.deps, small.org.id, {});
    const res = await placeCall(w.ctx, small.liveKey, { agentId: small.agent.id, to: freshNumber() });
    const id = (await res.json()).id;
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${id}`) === 1, { stepMs: 5 });
    expect(w.liveKit.dials.find((d) => d.identity === `sip_${id}`)!.maxCallDurationSeconds).toBe(120);
  });
});
