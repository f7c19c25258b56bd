import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { TokenVerifier } from "livekit-server-sdk";
import { LiveKit, LiveKitError, PARTICIPANT_TOKEN_TTL_SECONDS } from "../../src/livekit/client.ts";
import { sipCallAnswered, sipIdentity } from "../../src/livekit/sip.ts";
import { type FakeLiveKit, liveKitEvents, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { newId } from "../helpers/ids.ts";

let fake: FakeLiveKit;
let lk: LiveKit;

beforeAll(async () => {
  fake = await startFakeLiveKit();
  lk = new LiveKit({ url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret });
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.requests.length = 0;
  for (const m of ["CreateRoom", "DeleteRoom", "CreateDispatch", "ListParticipants", "ListRooms"] as const)
    fake.fail(m, null);
});

describe("createRoom and dispatchAgent (the room of any live call)", () => {
  test("a room with its settings and metadata; the agent dispatched with a phone call's metadata", async () => {
    const callId = newId("call");
    await lk.createRoom(callId, { metadata: { callId }, emptyTimeoutSeconds: 60, maxParticipants: 3 });
    const id = await lk.dispatchAgent(callId, "sales-agent", {
      callId,
      variables: { name: "Ada" },
      direction: "outbound",
      to: "+33612345678",
    });
    expect(id).toMatch(/^AD_/);
    expect(fake.requests.map((r) => `${r.method} ${r.status}`)).toEqual([
      "CreateRoom 200",
      "CreateDispatch 200",
    ]);
    const [create, dispatch] = fake.requests;
    expect(create!.body).toMatchObject({
      name: callId,
      emptyTimeout: 60,
      departureTimeout: 20,
      maxParticipants: 3,
    });
    expect(JSON.parse(String(create!.body.metadata))).toEqual({ callId });
    expect(create!.claims?.video).toEqual({ roomCreate: true });
    expect(dispatch!.claims?.video).toEqual({ roomAdmin: true, room: callId });
    expect(JSON.parse(fake.dispatches.at(-1)!.metadata)).toEqual({
      callId,
      variables: { name: "Ada" },
      direction: "outbound",
      to: "+33612345678",
    });
  });

  test("defaults: empty timeout 120 s, departure 20 s, two participants, no metadata", async () => {
    const name = newId("call");
    await lk.createRoom(name);
    expect(fake.requests[0]!.body).toEqual({
      name,
      emptyTimeout: 120,
      departureTimeout: 20,
      maxParticipants: 2,
    });
  });

  test("failures are LiveKitErrors naming the step and LiveKit's code", async () => {
    fake.fail("CreateRoom");
    const a = await lk.createRoom(newId("call")).catch((e) => e);
    expect(a).toBeInstanceOf(LiveKitError);
    expect(a).toMatchObject({ step: "CreateRoom", code: "internal", httpStatus: 500, sipStatusCode: null });
    fake.fail("CreateDispatch");
    const b = await lk.dispatchAgent("room", "agent", {}).catch((e) => e);
    expect(b).toMatchObject({ step: "CreateDispatch", code: "internal" });
  });
});

describe("signed requests", () => {
  test("each request carries a token the SDK verifies: the API key's, its grant, ten minutes long", async () => {
    const room = newId("call");
    await lk.createRoom(room);
    await lk.dispatchAgent(room, "agent", {});
    await lk.dialSip({
      callId: room,
      roomName: room,
      trunkId: "ST_x",
      to: "+33612345678",
      from: null,
      maxSeconds: 60,
    });
    // The SDK's own verifier accepts each token as the fake received it.
    const verifier = new TokenVerifier(fake.apiKey, fake.apiSecret);
    const byMethod = new Map(fake.requests.map((r) => [r.method, r]));
    for (const method of ["CreateRoom", "CreateDispatch", "CreateSIPParticipant"]) {
      const request = byMethod.get(method)!;
      expect(request.status).toBe(200);
      expect(await verifier.verify(request.token!)).toEqual(request.claims!);
      const claims = request.claims as { iss: string; exp: number; nbf: number };
      expect(claims.iss).toBe(fake.apiKey);
      expect(claims.exp - claims.nbf).toBe(600);
      expect(Math.abs(claims.nbf - Date.now() / 1000)).toBeLessThan(5);
    }
    const claims = (method: string) => byMethod.get(method)!.claims!;
    expect(claims("CreateRoom").video).toEqual({ roomCreate: true });
    expect(claims("CreateDispatch").video).toEqual({ roomAdmin: true, room });
    expect(claims("CreateSIPParticipant").sip).toEqual({ call: true });
  });
});

describe("the fake's own checks", () => {
  test("a token it verified before is refused once expired, and a token signed with another secret always", async () => {
    const twirp = (jwt: string) =>
      fetch(`${fake.url}/twirp/livekit.RoomService/CreateRoom`, {
        method: "POST",
        headers: { authorization: `Bearer ${jwt}`, "content-type": "application/json" },
        body: JSON.stringify({ name: newId("call") }),
      });
    // HS256 by hand, to set the times: expired 8 s ago, within the SDK verifier's 10 s of tolerance
    // for one or two seconds more.
    const b64url = (bytes: Uint8Array) =>
      btoa(String.fromCharCode(...bytes))
        .replace(/=+$/, "")
        .replace(/\+/g, "-")
        .replace(/\//g, "_");
    const text = (o: unknown) => b64url(new TextEncoder().encode(JSON.stringify(o)));
    const sign = async (secret: string, exp: number) => {
      const data = `${text({ alg: "HS256", typ: "JWT" })}.${text({ iss: fake.apiKey, exp, nbf: exp - 600, video: { roomCreate: true } })}`;
      const key = await crypto.subtle.importKey(
        "raw",
        new TextEncoder().encode(secret),
        { name: "HMAC", hash: "SHA-256" },
        false,
        ["sign"],
      );
      const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(data));
      return `${data}.${b64url(new Uint8Array(mac))}`;
    };
    const now = Math.floor(Date.now() / 1000);
    const shortLived = await sign(fake.apiSecret, now - 8);
    expect((await twirp(shortLived)).status).toBe(200);
    expect((await twirp(shortLived)).status).toBe(200);
    await Bun.sleep(3100);
    expect((await twirp(shortLived)).status).toBe(401);
    const forged = await sign("another-secret-that-is-long-enough-0123456789", now + 600);
    expect((await twirp(forged)).status).toBe(401);
  });
});

describe("listParticipants", () => {
  test("identities, kinds, states and attributes of everyone in the room", async () => {
    const callId = newId("call");
    await lk.createRoom(callId);
    fake.addParticipant(callId, {
      identity: "agent-1",
      kind: "AGENT",
      attributes: { "lk.agent.state": "listening" },
    });
    fake.addParticipant(callId, {
      identity: sipIdentity(callId),
      kind: "SIP",
      attributes: { "sip.callStatus": "active", "sip.phoneNumber": "+33612345678" },
    });
    const participants = await lk.listParticipants(callId);
    expect(participants.sort((x, y) => x.identity.localeCompare(y.identity))).toEqual([
      {
        identity: "agent-1",
        kind: "AGENT",
        state: "ACTIVE",
        attributes: { "lk.agent.state": "listening" },
        joinedAt: expect.any(Date),
      },
      {
        identity: sipIdentity(callId),
        kind: "SIP",
        state: "ACTIVE",
        attributes: { "sip.callStatus": "active", "sip.phoneNumber": "+33612345678" },
        joinedAt: expect.any(Date),
      },
    ]);
    expect(sipCallAnswered(participants, callId)).toBe(true);
    expect(sipCallAnswered(participants, newId("call"))).toBe(false);
    const list = fake.requests.at(-1)!;
    expect(list.body).toEqual({ room: callId });
    expect(list.claims?.video).toEqual({ roomAdmin: true, room: callId });
  });

  test("a callee still ringing, or only the agent, is not an answered call", async () => {
    const callId = newId("call");
    fake.addParticipant(callId, { identity: "agent-1", kind: "AGENT" });
    expect(sipCallAnswered(await lk.listParticipants(callId), callId)).toBe(false);
    fake.addParticipant(callId, {
      identity: sipIdentity(callId),
      kind: "SIP",
      attributes: { "sip.callStatus": "ringing" },
    });
    expect(sipCallAnswered(await lk.listParticipants(callId), callId)).toBe(false);
  });

  test("a room LiveKit does not know has nobody in it; a failing server is a LiveKitError", async () => {
    expect(await lk.listParticipants("no-such-room")).toEqual([]);
    fake.fail("ListParticipants");
    expect(await lk.listParticipants("no-such-room").catch((e) => e)).toMatchObject({
      step: "ListParticipants",
      code: "internal",
    });
  });
});

describe("findRoom", () => {
  test("a room's creation time, empty timeout and participants; null for a room LiveKit does not know", async () => {
    const callId = newId("call");
    const before = Math.floor(Date.now() / 1000) * 1000;
    await lk.createRoom(callId);
    fake.addParticipant(callId, { identity: `visitor-${callId}` });
    const room = await lk.findRoom(callId);
    expect(room).toEqual({ createdAt: expect.any(Date), emptyTimeoutSeconds: 120, numParticipants: 1 });
    expect(room!.createdAt!.getTime()).toBeGreaterThanOrEqual(before);
    expect(await lk.findRoom("no-such-room")).toBeNull();
    // Asked by name, with the list grant LiveKit requires.
    const asked = fake.requests.filter((r) => r.method === "ListRooms");
    expect(asked.map((r) => [r.status, r.body.names, r.claims?.video?.roomList])).toEqual([
      [200, [callId], true],
      [200, ["no-such-room"], true],
    ]);
    fake.fail("ListRooms");
    expect(await lk.findRoom(callId).catch((e) => e)).toMatchObject({ step: "ListRooms", code: "internal" });
  });
});

describe("deleteRoom", () => {
  test("deletes a room and everyone in it; a room LiveKit does not know was already closed", async () => {
    const callId = newId("call");
    fake.addParticipant(callId, { identity: "agent-1", kind: "AGENT" });
    expect(await lk.deleteRoom(callId)).toBe("deleted");
    expect(await lk.listParticipants(callId)).toEqual([]);
    expect(await lk.deleteRoom(callId)).toBe("already_closed");
    expect(fake.requests.filter((r) => r.method === "DeleteRoom").map((r) => r.status)).toEqual([200, 404]);
  });

  test("other failures are thrown: an error answer, a dropped connection, no answer in time", async () => {
    fake.fail("DeleteRoom");
    expect(await lk.deleteRoom("r").catch((e) => e)).toMatchObject({ step: "DeleteRoom", code: "internal" });
    fake.fail("DeleteRoom", "drop");
    expect(await lk.deleteRoom("r").catch((e) => e)).toMatchObject({
      code: "network_error",
      httpStatus: null,
    });
    fake.fail("DeleteRoom", "hang");
    const quick = new LiveKit(lk.config, { requestTimeoutSeconds: 0.2 });
    expect(await quick.deleteRoom("r").catch((e) => e)).toMatchObject({ code: "timeout" });
  });
});

describe("participantToken", () => {
  const verifier = () => new TokenVerifier(fake.apiKey, fake.apiSecret);
  const lifetime = (claims: unknown) => {
    const { exp, nbf } = claims as { exp: number; nbf: number };
    return exp - nbf;
  };

  test("joins one room only, publish and subscribe, nothing administrative; lives the TTL asked", async () => {
    const token = await lk.participantToken("call_1", "sip-agent-view", 180);
    const claims = await verifier().verify(token);
    expect(claims.sub).toBe("sip-agent-view");
    expect(claims.video).toEqual({ roomJoin: true, room: "call_1", canPublish: true, canSubscribe: true });
    expect(claims.sip).toBeUndefined();
    expect(lifetime(claims)).toBe(180);
  });

  test("10 minutes by default, and never more", async () => {
    expect(lifetime(await verifier().verify(await lk.participantToken("r", "a")))).toBe(
      PARTICIPANT_TOKEN_TTL_SECONDS,
    );
    expect(lifetime(await verifier().verify(await lk.participantToken("r", "a", 3660)))).toBe(600);
  });

  test("a TTL that is not a whole positive number of seconds is refused", async () => {
    for (const ttl of [0, -1, 1.5, Number.NaN]) {
      await expect(lk.participantToken("r", "a", ttl)).rejects.toBeInstanceOf(RangeError);
    }
  });
});

describe("errors never carry secrets", () => {
  test("a server that echoes the request's token and the secret: both are masked", async () => {
    const apiSecret = "a-very-secret-livekit-api-secret-0123456789";
    const echo = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req) =>
        new Response(
          JSON.stringify({
            code: "unauthenticated",
            msg: `bad ${req.headers.get("authorization")} signed with ${apiSecret}`,
            meta: { sip_status_code: "403", sip_status: `Forbidden ${apiSecret}` },
          }),
          { status: 401, headers: { "content-type": "application/json" } },
        ),
    });
    try {
      const client = new LiveKit({ url: `http://127.0.0.1:${echo.port}`, apiKey: "APIx", apiSecret });
      const errors = [
        await client.createRoom("r").catch((e) => e),
        await client.listParticipants("r").catch((e) => e),
        await client
          .dialSip({
            callId: "call_1",
            roomName: "r",
            trunkId: "ST_1",
            to: "+33600000000",
            from: null,
            maxSeconds: 60,
          })
          .catch((e) => e),
      ];
      for (const err of errors) {
        expect(err).toBeInstanceOf(LiveKitError);
        const text = `${err.message} ${err.stack} ${JSON.stringify(err)} ${err.sipStatus ?? ""} ${err.detail}`;
        expect(text).not.toContain(apiSecret);
        expect(text).not.toMatch(/eyJ[\w-]+\.[\w-]+\./);
        expect(text).toContain("[redacted]");
        expect(err.code).toBe("unauthenticated");
      }
      expect(errors[2].sipStatusCode).toBe(403);
    } finally {
      await echo.stop(true);
    }
  });

  test("a server that cannot be reached is a network_error", async () => {
    const gone = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
    const url = `http://127.0.0.1:${gone.port}`;
    await gone.stop(true);
    const err = await new LiveKit({ ...lk.config, url }).createRoom("r").catch((e) => e);
    expect(err).toMatchObject({ step: "CreateRoom", code: "network_error", httpStatus: null });
    expect(err.message).not.toContain(lk.config.apiSecret);
  });
});

describe("webhook events with their own times", () => {
  test("participant_left of the callee (kind SIP) and room_finished, createdAt as LiveKit sends it", async () => {
    const callId = newId("call");
    const at = new Date("2026-11-21T09:30:42.750Z");
    const left = liveKitEvents.participantLeft(callId, sipIdentity(callId), { createdAt: at });
    expect(left.createdAt).toBe(String(Math.floor(at.getTime() / 1000)));
    const signed = await fake.signWebhook(left);
    const event = await lk.receiveWebhook(signed.body, signed.headers.authorization);
    expect(event?.event).toBe("participant_left");
    expect(event?.participant?.identity).toBe(`sip_${callId}`);
    expect(event?.participant?.toJson()).toMatchObject({ kind: "SIP", state: "DISCONNECTED" });
    expect(event?.room?.name).toBe(callId);
    expect(Number(event?.createdAt)).toBe(Math.floor(at.getTime() / 1000));

    const finished = liveKitEvents.roomFinished(callId, { createdAt: 1_800_000_000 });
    const signed2 = await fake.signWebhook(finished);
    const event2 = await lk.receiveWebhook(signed2.body, signed2.headers.authorization);
    expect(event2?.event).toBe("room_finished");
    expect(Number(event2?.createdAt)).toBe(1_800_000_000);

    const agentLeft = liveKitEvents.participantLeft(callId, "agent-1", { kind: "AGENT" });
    expect(agentLeft.participant.kind).toBe("AGENT");
    expect(Math.abs(Number(agentLeft.createdAt) - Date.now() / 1000)).toBeLessThan(5);
  });
});
