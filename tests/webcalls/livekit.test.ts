import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { TokenVerifier } from "livekit-server-sdk";
import { parseEnv } from "../../src/env.ts";
import {
  clientServerUrl,
  createLiveKit,
  LiveKit,
  LiveKitError,
  liveKitAgentName,
  liveKitConfig,
  PARTICIPANT_TOKEN_TTL_SECONDS,
} from "../../src/livekit/client.ts";
import { type FakeLiveKit, liveKitEvents, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { newId } from "../helpers/ids.ts";

let fake: FakeLiveKit;
let lk: LiveKit;

beforeAll(async () => {
  fake = await startFakeLiveKit();
  lk = createLiveKit(parseEnv(fake.env))!;
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.requests.length = 0;
  fake.fail("CreateRoom", null);
  fake.fail("CreateDispatch", null);
  fake.fail("DeleteRoom", null);
});

describe("configuration", () => {
  test("all three variables are needed; otherwise live web calls are unavailable", () => {
    expect(liveKitConfig(parseEnv({}))).toBeNull();
    expect(
      liveKitConfig(parseEnv({ LIVEKIT_URL: "https://lk.example.com", LIVEKIT_API_KEY: "k" })),
    ).toBeNull();
    expect(createLiveKit(parseEnv({ LIVEKIT_URL: "https://lk.example.com" }))).toBeNull();
    expect(
      liveKitConfig(
        parseEnv({ LIVEKIT_URL: "https://lk.example.com", LIVEKIT_API_KEY: "k", LIVEKIT_API_SECRET: "s" }),
      ),
    ).toEqual({ url: "https://lk.example.com", apiKey: "k", apiSecret: "s" });
  });

  test("the agent is dispatched by its livekitAgentName, or by its id", () => {
    expect(liveKitAgentName({ id: "agt_1", livekit_agent_name: "reception" })).toBe("reception");
    expect(liveKitAgentName({ id: "agt_1", livekit_agent_name: null })).toBe("agt_1");
  });

  test("the client URL is LIVEKIT_URL with http → ws and https → wss", () => {
    expect(clientServerUrl("http://127.0.0.1:7880")).toBe("ws://127.0.0.1:7880");
    expect(clientServerUrl("https://media.example.com")).toBe("wss://media.example.com");
    expect(clientServerUrl("HTTPS://media.example.com/")).toBe("wss://media.example.com/");
    expect(clientServerUrl("wss://already.example.com")).toBe("wss://already.example.com");
  });
});

describe("startWebCall with the real SDK against a Twirp server", () => {
  test("creates the room, dispatches the agent with the call's variables, and signs a room-only token", async () => {
    const callId = newId("call");
    const room = await lk.startWebCall({
      callId,
      agentName: "reception-agent",
      variables: { name: "Ada", n: 2 },
      maxSeconds: 600,
    });
    expect(room.name).toBe(callId);
    expect(room.serverUrl).toBe(fake.url.replace("http://", "ws://"));

    expect(fake.requests.map((r) => `${r.service}/${r.method} ${r.status}`)).toEqual([
      "RoomService/CreateRoom 200",
      "AgentDispatchService/CreateDispatch 200",
    ]);
    const [create, dispatch] = fake.requests;
    expect(create!.body).toMatchObject({ name: callId, emptyTimeout: 120, maxParticipants: 2 });
    expect(JSON.parse(String(create!.body.metadata))).toEqual({ callId });
    expect(create!.claims?.video?.roomCreate).toBe(true);
    expect(dispatch!.body).toMatchObject({ room: callId, agentName: "reception-agent" });
    expect(JSON.parse(String(dispatch!.body.metadata))).toEqual({ callId, variables: { name: "Ada", n: 2 } });
    expect(dispatch!.claims?.video).toMatchObject({ roomAdmin: true, room: callId });
    expect(fake.rooms.get(callId)?.maxParticipants).toBe(2);
    // The browser sees room metadata; the variables are only in the agent's dispatch.
    expect(fake.rooms.get(callId)?.metadata).not.toContain("Ada");

    const claims = await new TokenVerifier(fake.apiKey, fake.apiSecret).verify(room.participantToken);
    expect(claims.sub).toBe(`visitor-${callId}`);
    expect(claims.video).toEqual({ roomJoin: true, room: callId, canPublish: true, canSubscribe: true });
    const { exp, nbf } = claims as { exp: number; nbf: number };
    expect(exp - nbf).toBeLessThanOrEqual(600);
    expect(exp - Math.floor(Date.now() / 1000)).toBeLessThanOrEqual(PARTICIPANT_TOKEN_TTL_SECONDS);
  });

  test("the participant token lives min(600, maxSeconds + 60) seconds: never longer than the call may", async () => {
    const verifier = new TokenVerifier(fake.apiKey, fake.apiSecret);
    for (const [maxSeconds, ttl] of [
      [60, 120],
      [300, 360],
      [540, 600],
      [600, 600],
    ] as const) {
      const room = await lk.startWebCall({
        callId: newId("call"),
        agentName: "x",
        variables: {},
        maxSeconds,
      });
      const { exp, nbf } = (await verifier.verify(room.participantToken)) as { exp: number; nbf: number };
      expect(exp - nbf).toBe(ttl);
    }
  });

  test("each call gets its own room and its own participant identity", async () => {
    const a = await lk.startWebCall({
      callId: newId("call"),
      agentName: "x",
      variables: {},
      maxSeconds: 600,
    });
    const b = await lk.startWebCall({
      callId: newId("call"),
      agentName: "x",
      variables: {},
      maxSeconds: 600,
    });
    const verifier = new TokenVerifier(fake.apiKey, fake.apiSecret);
    const [ca, cb] = await Promise.all([
      verifier.verify(a.participantToken),
      verifier.verify(b.participantToken),
    ]);
    expect(ca.sub).not.toBe(cb.sub);
    expect(ca.video?.room).toBe(a.name);
    expect(cb.video?.room).toBe(b.name);
  });

  test("a failing CreateRoom is a LiveKitError and nothing is dispatched", async () => {
    fake.fail("CreateRoom");
    const err = await lk
      .startWebCall({ callId: newId("call"), agentName: "x", variables: {}, maxSeconds: 600 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(LiveKitError);
    expect(err.message).toContain("CreateRoom");
    expect(fake.requests.map((r) => r.method)).toEqual(["CreateRoom"]);
  });

  test("a failing CreateDispatch is a LiveKitError and the room is deleted again", async () => {
    fake.fail("CreateDispatch");
    const callId = newId("call");
    const err = await lk
      .startWebCall({ callId, agentName: "x", variables: {}, maxSeconds: 600 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(LiveKitError);
    expect(err.message).toContain("CreateDispatch");
    expect(fake.requests.map((r) => `${r.method} ${r.status}`)).toEqual([
      "CreateRoom 200",
      "CreateDispatch 500",
      "DeleteRoom 200",
    ]);
    expect(fake.rooms.has(callId)).toBe(false);
  });

  test("a media server that does not answer is a LiveKitError after the request timeout", async () => {
    fake.fail("CreateRoom", "hang");
    const quick = new LiveKit(lk.config, { requestTimeoutSeconds: 0.3 });
    const started = performance.now();
    const err = await quick
      .startWebCall({ callId: newId("call"), agentName: "x", variables: {}, maxSeconds: 600 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(LiveKitError);
    expect(performance.now() - started).toBeLessThan(3000);
  });

  test("a wrong API secret is refused by the server (unauthenticated) and surfaces as a LiveKitError", async () => {
    const wrong = new LiveKit({ ...lk.config, apiSecret: "not-the-secret-not-the-secret-0000" });
    const err = await wrong
      .startWebCall({ callId: newId("call"), agentName: "x", variables: {}, maxSeconds: 600 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(LiveKitError);
    expect(fake.requests.at(-1)?.status).toBe(401);
  });

  test("the fake checks grants: a token without roomCreate cannot create rooms", async () => {
    const { AccessToken } = await import("livekit-server-sdk");
    const at = new AccessToken(fake.apiKey, fake.apiSecret, { identity: "x", ttl: 60 });
    at.addGrant({ roomJoin: true, room: "r" });
    const res = await fetch(`${fake.url}/twirp/livekit.RoomService/CreateRoom`, {
      method: "POST",
      headers: { authorization: `Bearer ${await at.toJwt()}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "r" }),
    });
    expect(res.status).toBe(403);
    expect((await res.json()).code).toBe("permission_denied");
  });
});

describe("deleteRoom (the maxSeconds timer)", () => {
  test("deletes the call's room", async () => {
    const room = await lk.startWebCall({
      callId: newId("call"),
      agentName: "x",
      variables: {},
      maxSeconds: 600,
    });
    expect(await lk.deleteRoom(room.name)).toBe("deleted");
    expect(fake.rooms.has(room.name)).toBe(false);
    const del = fake.requests.at(-1)!;
    expect(del.method).toBe("DeleteRoom");
    expect(del.body).toEqual({ room: room.name });
    expect(del.claims?.video?.roomCreate).toBe(true);
  });

  test("a room LiveKit does not know was already closed; a failing server is a LiveKitError", async () => {
    expect(await lk.deleteRoom("no-such-room")).toBe("already_closed");
    expect(fake.requests.at(-1)?.status).toBe(404);
    const room = await lk.startWebCall({
      callId: newId("call"),
      agentName: "x",
      variables: {},
      maxSeconds: 600,
    });
    fake.fail("DeleteRoom");
    const err = await lk.deleteRoom(room.name).catch((e) => e);
    expect(err).toBeInstanceOf(LiveKitError);
    expect(err.code).toBe("internal");
    expect(fake.rooms.has(room.name)).toBe(true);
  });
});

describe("receiveWebhook", () => {
  test("a webhook signed with the API secret is verified and parsed", async () => {
    const { body, headers } = await fake.signWebhook(liveKitEvents.roomFinished("call_123"));
    expect(headers["content-type"]).toBe("application/webhook+json");
    const event = await lk.receiveWebhook(body, headers.authorization);
    expect(event?.event).toBe("room_finished");
    expect(event?.room?.name).toBe("call_123");
  });

  test("participant events carry the identity and kind", async () => {
    const { body, headers } = await fake.signWebhook(
      liveKitEvents.participantJoined("call_9", "agent-1", "AGENT"),
    );
    const event = await lk.receiveWebhook(body, `Bearer ${headers.authorization}`);
    expect(event?.event).toBe("participant_joined");
    expect(event?.participant?.identity).toBe("agent-1");
    expect(event?.room?.name).toBe("call_9");
  });

  test("missing, malformed, wrongly signed or tampered webhooks are refused", async () => {
    const { body, headers } = await fake.signWebhook(liveKitEvents.roomFinished("call_1"));
    expect(await lk.receiveWebhook(body, undefined)).toBeNull();
    expect(await lk.receiveWebhook(body, "")).toBeNull();
    expect(await lk.receiveWebhook(body, "not-a-jwt")).toBeNull();
    expect(await lk.receiveWebhook(body.replace("call_1", "call_2"), headers.authorization)).toBeNull();
    const forged = await fake.signWebhook(liveKitEvents.roomFinished("call_1"), {
      secret: "another-secret-0123456789",
    });
    expect(await lk.receiveWebhook(forged.body, forged.headers.authorization)).toBeNull();
    const otherKey = await fake.signWebhook(liveKitEvents.roomFinished("call_1"), { apiKey: "APIother" });
    expect(await lk.receiveWebhook(otherKey.body, otherKey.headers.authorization)).toBeNull();
    expect(await lk.receiveWebhook("{not json", headers.authorization)).toBeNull();
  });
});
