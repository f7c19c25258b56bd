import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { AccessToken, SipClient } from "livekit-server-sdk";
import { LiveKit, LiveKitError } from "../../src/livekit/client.ts";
import { dialFailureEnd, sipCallAnswered, sipIdentity } from "../../src/livekit/sip.ts";
import { type DialScript, type FakeLiveKit, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { newId } from "../helpers/ids.ts";
import { waitUntil } from "../helpers/wait.ts";

/**
 * Dialling through the real SDK's SipClient against the fake LiveKit. The fake rings through a
 * `ring_timeout` at 1/100 of the real time (30 s → 300 ms).
 */

let fake: FakeLiveKit;
let lk: LiveKit;
const TRUNK = "ST_outbound";

beforeAll(async () => {
  fake = await startFakeLiveKit({ timeScale: 0.01 });
  lk = new LiveKit({ url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret });
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.requests.length = 0;
  fake.setDefaultDial({ kind: "answer", afterMs: 50 });
});
afterEach(() => fake.releaseDials({ kind: "error", status: 503, code: "unavailable" }));

/** A fresh number for each dial, so scripts never leak between tests. */
let numberSeq = 0;
function nextNumber(): string {
  numberSeq += 1;
  return `+3361234${String(numberSeq).padStart(4, "0")}`;
}

function dialInput(over: Partial<Parameters<LiveKit["dialSip"]>[0]> = {}) {
  const callId = newId("call");
  return {
    callId,
    roomName: callId,
    trunkId: TRUNK,
    to: nextNumber(),
    from: "+33100000000",
    maxSeconds: 600,
    ...over,
  };
}

describe("dialSip: CreateSIPParticipant through the SDK", () => {
  test("an answered call: the request LiveKit receives, the callee's participant, the answer", async () => {
    const input = dialInput({ maxSeconds: 1234 });
    fake.scriptDial(input.to, { kind: "answer", afterMs: 150 });
    const started = performance.now();
    const answered = await lk.dialSip(input);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);

    expect(answered).toMatchObject({ participantIdentity: `sip_${input.callId}`, roomName: input.roomName });
    expect(answered.participantId).toMatch(/^PA_/);
    expect(answered.sipCallId).toMatch(/^SCL_/);

    expect(fake.requests).toHaveLength(1);
    const req = fake.requests[0]!;
    expect(`${req.service}/${req.method} ${req.status}`).toBe("SIP/CreateSIPParticipant 200");
    expect(req.body).toEqual({
      sipTrunkId: TRUNK,
      sipCallTo: input.to,
      sipNumber: "+33100000000",
      roomName: input.roomName,
      participantIdentity: sipIdentity(input.callId),
      ringingTimeout: "30s",
      maxCallDuration: "1234s",
      waitUntilAnswered: true,
    });
    // The SIP service asks for the `call` SIP grant and nothing of the rooms.
    expect(req.claims?.sip).toEqual({ call: true });
    expect(req.claims?.video?.roomAdmin).toBeUndefined();
    expect(req.claims?.video?.roomCreate).toBeUndefined();

    const participants = await lk.listParticipants(input.roomName);
    expect(participants).toEqual([
      expect.objectContaining({ identity: `sip_${input.callId}`, kind: "SIP", state: "ACTIVE" }),
    ]);
    expect(participants[0]!.attributes).toMatchObject({
      "sip.callStatus": "active",
      "sip.phoneNumber": input.to,
    });
    expect(sipCallAnswered(participants, input.callId)).toBe(true);
    expect(fake.dialCount(sipIdentity(input.callId))).toBe(1);
  });

  test("without a caller number, sip_number is left out (the trunk's own number is used)", async () => {
    const input = dialInput({ from: null });
    await lk.dialSip(input);
    expect(fake.requests[0]!.body).not.toHaveProperty("sipNumber");
    expect(fake.dials.at(-1)!.from).toBeNull();
  });

  test("while the dial is in flight the room holds the callee, dialing then ringing; it is not answered", async () => {
    const input = dialInput();
    fake.scriptDial(input.to, { kind: "hang" });
    const dialing = lk.dialSip(input);
    await waitUntil(
      "the callee in the room",
      async () => (await lk.listParticipants(input.roomName)).length > 0,
    );
    const statuses = new Set<string>();
    await waitUntil(
      "the callee ringing",
      async () => {
        const [p] = await lk.listParticipants(input.roomName);
        if (p) statuses.add(p.attributes["sip.callStatus"]!);
        expect(sipCallAnswered(p ? [p] : [], input.callId)).toBe(false);
        return p?.attributes["sip.callStatus"] === "ringing";
      },
      { stepMs: 5 },
    );
    expect([...statuses].every((s) => s === "dialing" || s === "ringing")).toBe(true);
    fake.releaseDials();
    await dialing;
    expect(sipCallAnswered(await lk.listParticipants(input.roomName), input.callId)).toBe(true);
  });

  test("the dial may outlast the client's request timeout (it waits for the ringing timeout)", async () => {
    const quick = new LiveKit(lk.config, { requestTimeoutSeconds: 0.2 });
    const input = dialInput();
    fake.scriptDial(input.to, { kind: "answer", afterMs: 600 });
    await expect(quick.dialSip(input)).resolves.toMatchObject({ participantIdentity: `sip_${input.callId}` });
    // Other requests keep the short timeout.
    fake.fail("ListParticipants", "hang");
    try {
      const err = await quick.listParticipants(input.roomName).catch((e) => e);
      expect(err).toBeInstanceOf(LiveKitError);
      expect(err.code).toBe("timeout");
    } finally {
      fake.fail("ListParticipants", null);
    }
  });

  test("maxSeconds must be a whole positive number; nothing is sent otherwise", async () => {
    for (const maxSeconds of [0, -5, 1.5, Number.NaN]) {
      await expect(lk.dialSip(dialInput({ maxSeconds }))).rejects.toBeInstanceOf(RangeError);
    }
    expect(fake.requests).toHaveLength(0);
  });
});

describe("dial failures and how each ends the call", () => {
  const cases: [sip: number, end: ReturnType<typeof dialFailureEnd>, twirp: string, http: number][] = [
    [486, { status: "busy", outcome: null, sipStatusCode: 486 }, "resource_exhausted", 429],
    [600, { status: "busy", outcome: null, sipStatusCode: 600 }, "resource_exhausted", 429],
    [603, { status: "busy", outcome: null, sipStatusCode: 603 }, "permission_denied", 403],
    [408, { status: "no_answer", outcome: null, sipStatusCode: 408 }, "deadline_exceeded", 408],
    [480, { status: "no_answer", outcome: null, sipStatusCode: 480 }, "resource_exhausted", 429],
    [487, { status: "no_answer", outcome: null, sipStatusCode: 487 }, "aborted", 409],
    [404, { status: "failed", outcome: "404", sipStatusCode: 404 }, "not_found", 404],
    [488, { status: "failed", outcome: "488", sipStatusCode: 488 }, "invalid_argument", 400],
    [503, { status: "failed", outcome: "503", sipStatusCode: 503 }, "failed_precondition", 412],
  ];
  for (const [sip, end, twirp, http] of cases) {
    test(`SIP ${sip} → ${end.status}${end.outcome ? ` (${end.outcome})` : ""}`, async () => {
      const input = dialInput();
      fake.scriptDial(input.to, { kind: "sip_error", sipStatus: sip, afterMs: 30 });
      const err = await lk.dialSip(input).catch((e) => e);
      expect(err).toBeInstanceOf(LiveKitError);
      expect(err).toMatchObject({
        step: "CreateSIPParticipant",
        code: twirp,
        httpStatus: http,
        sipStatusCode: sip,
      });
      expect(err.sipStatus).toBeString();
      expect(dialFailureEnd(err)).toEqual(end);
      expect(fake.requests.map((r) => r.status)).toEqual([http]);
      // The callee left the room; it was dialled once.
      expect(await lk.listParticipants(input.roomName)).toEqual([]);
      expect(fake.dialCount(sipIdentity(input.callId))).toBe(1);
    });
  }

  const noSip: [name: string, script: DialScript, outcome: string][] = [
    ["LiveKit unavailable (503)", { kind: "error", status: 503, code: "unavailable" }, "unavailable"],
    ["an unknown trunk (404 not_found)", { kind: "error", status: 404, code: "not_found" }, "not_found"],
    ["an internal error (500)", { kind: "error", status: 500, code: "internal" }, "internal"],
    ["a dropped connection", { kind: "drop" }, "network_error"],
  ];
  for (const [name, script, outcome] of noSip) {
    test(`${name} → failed with outcome ${outcome}`, async () => {
      const input = dialInput();
      fake.scriptDial(input.to, script);
      const err = await lk.dialSip(input).catch((e) => e);
      expect(err).toBeInstanceOf(LiveKitError);
      expect(err.sipStatusCode).toBeNull();
      expect(dialFailureEnd(err)).toEqual({ status: "failed", outcome, sipStatusCode: null });
    });
  }

  test("the ringing timeout → no_answer (LiveKit gives up after the request's ringing_timeout)", async () => {
    const input = dialInput();
    fake.scriptDial(input.to, { kind: "ring_timeout" });
    const started = performance.now();
    const err = await lk.dialSip(input).catch((e) => e);
    // 30 s at the fake's 1/100 scale.
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(err).toMatchObject({ code: "canceled", httpStatus: 408, sipStatusCode: null });
    expect(dialFailureEnd(err)).toEqual({ status: "no_answer", outcome: null, sipStatusCode: null });
    expect(await lk.listParticipants(input.roomName)).toEqual([]);
  });

  test("a wrong API secret is refused (unauthenticated) and ends the call failed", async () => {
    const wrong = new LiveKit({ ...lk.config, apiSecret: "not-the-secret-not-the-secret-0000" });
    const before = fake.dials.length;
    const err = await wrong.dialSip(dialInput()).catch((e) => e);
    expect(err).toMatchObject({ code: "unauthenticated", httpStatus: 401 });
    expect(dialFailureEnd(err)).toEqual({
      status: "failed",
      outcome: "unauthenticated",
      sipStatusCode: null,
    });
    expect(fake.dials.length).toBe(before);
  });

  test("the fake checks the SIP grant: a token without `call` cannot dial", async () => {
    const at = new AccessToken(fake.apiKey, fake.apiSecret, { ttl: 60 });
    at.addGrant({ roomAdmin: true, roomCreate: true, room: "r" });
    at.addSIPGrant({ admin: true });
    const before = fake.dials.length;
    const res = await fetch(`${fake.url}/twirp/livekit.SIP/CreateSIPParticipant`, {
      method: "POST",
      headers: { authorization: `Bearer ${await at.toJwt()}`, "content-type": "application/json" },
      body: JSON.stringify({ sipTrunkId: TRUNK, sipCallTo: "+33600000000", roomName: "r" }),
    });
    expect(res.status).toBe(403);
    expect((await res.json()).code).toBe("permission_denied");
    expect(fake.dials.length).toBe(before);
  });
});

describe("closing the room", () => {
  test("deleting the room hangs up a ringing callee: the dial ends and nobody is left", async () => {
    const input = dialInput();
    fake.scriptDial(input.to, { kind: "hang" });
    const dialing = lk.dialSip(input).catch((e) => e);
    await waitUntil(
      "the callee in the room",
      () => fake.rooms.get(input.roomName)?.participants.has(sipIdentity(input.callId)) ?? false,
    );
    expect(await lk.deleteRoom(input.roomName)).toBe("deleted");
    const err = await dialing;
    expect(err).toBeInstanceOf(LiveKitError);
    expect(fake.dials.at(-1)!.state).toBe("hung_up");
    expect(await lk.listParticipants(input.roomName)).toEqual([]);
    expect(fake.dialCount(sipIdentity(input.callId))).toBe(1);
  });
});

describe("what the fake records", () => {
  test("each request's arrival time (performance clock and wall clock), and dials per identity", async () => {
    const a = dialInput();
    const b = dialInput();
    const before = performance.now();
    const beforeWall = Date.now();
    await Promise.all([lk.dialSip(a), lk.dialSip(b)]);
    await lk.dialSip({ ...a, to: nextNumber() });
    const after = performance.now();
    for (const r of fake.requests) {
      expect(r.at).toBeGreaterThanOrEqual(before);
      expect(r.at).toBeLessThanOrEqual(after);
      expect(r.receivedAt.getTime()).toBeGreaterThanOrEqual(beforeWall - 1);
    }
    expect(fake.dialCount(sipIdentity(a.callId))).toBe(2);
    expect(fake.dialCount(sipIdentity(b.callId))).toBe(1);
    expect(fake.dialCount(sipIdentity(newId("call")))).toBe(0);
  });

  test("20 dials at once are each received once and all answered", async () => {
    const inputs = Array.from({ length: 20 }, () => dialInput());
    const answers = await Promise.all(inputs.map((i) => lk.dialSip(i)));
    expect(answers.map((a) => a.participantIdentity).sort()).toEqual(
      inputs.map((i) => sipIdentity(i.callId)).sort(),
    );
    for (const i of inputs) expect(fake.dialCount(sipIdentity(i.callId))).toBe(1);
    expect(fake.requests).toHaveLength(20);
  });
});

describe("regional failover is off: a dial is never replayed", () => {
  /**
   * The SDK fails over only for LiveKit Cloud hosts (`*.livekit.cloud`): on a 5xx or a transport
   * error it asks /settings/regions for other regions and replays the request there. To put the SDK
   * in that situation, these tests resolve `*.livekit.cloud` to the fake (the fake's regions name a
   * second cloud host, which resolves to it as well), at the level of fetch, like a hosts file would.
   */
  const CLOUD = "http://project.livekit.cloud";
  let realFetch: typeof fetch;

  beforeAll(() => {
    realFetch = globalThis.fetch;
    const resolve = (input: string | URL | Request): string | URL | Request => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (!url.hostname.endsWith(".livekit.cloud")) return input;
      return new URL(`${url.pathname}${url.search}`, fake.url);
    };
    globalThis.fetch = Object.assign(
      (input: string | URL | Request, init?: RequestInit) => realFetch(resolve(input), init),
      { preconnect: realFetch.preconnect },
    ) as typeof fetch;
    fake.regions = ["https://other-region.livekit.cloud"];
  });
  afterAll(() => {
    globalThis.fetch = realFetch;
    fake.regions = [];
  });

  const failures: [string, DialScript][] = [
    ["a 503 answer", { kind: "error", status: 503, code: "unavailable" }],
    ["a dropped connection", { kind: "drop" }],
  ];
  for (const [name, script] of failures) {
    test(`${name}: the SDK left to its default would dial twice; the service dials once`, async () => {
      const warn = console.warn;
      console.warn = () => {}; // the SDK announces each failover on the console
      try {
        // The control: the SDK's default (failover on) replays the request against the other region.
        const control = dialInput();
        fake.scriptDial(control.to, script);
        const sdk = new SipClient(CLOUD, fake.apiKey, fake.apiSecret);
        await sdk
          .createSipParticipant(TRUNK, control.to, control.roomName, {
            participantIdentity: sipIdentity(control.callId),
            waitUntilAnswered: true,
          })
          .catch(() => {});
        expect(fake.dialCount(sipIdentity(control.callId))).toBe(2);

        const input = dialInput();
        fake.scriptDial(input.to, script);
        const cloud = new LiveKit({ ...lk.config, url: CLOUD });
        const err = await cloud.dialSip(input).catch((e) => e);
        expect(err).toBeInstanceOf(LiveKitError);
        expect(dialFailureEnd(err).status).toBe("failed");
        expect(fake.dialCount(sipIdentity(input.callId))).toBe(1);
      } finally {
        console.warn = warn;
      }
    });
  }
});
