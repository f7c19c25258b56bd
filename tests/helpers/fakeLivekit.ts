import type { ClaimGrants } from "livekit-server-sdk";
import { bodyDigest, signToken, verifyToken } from "../../src/livekit/tokens.ts";

/**
 * A local stand-in for a LiveKit server's API: a real HTTP server speaking LiveKit's Twirp JSON
 * protocol for the calls the service makes: RoomService CreateRoom / DeleteRoom / ListParticipants / ListRooms,
 * AgentDispatchService CreateDispatch, and the SIP service's CreateSIPParticipant (outbound dialling,
 * scriptable per dialled number). Each request must carry `Authorization: Bearer <JWT>` signed with
 * the API secret, issued by the API key, with the grants LiveKit requires for the method. Every
 * request is recorded with its arrival time; a switch makes a method fail, hang or drop the connection.
 */

export type TwirpMethod =
  | "CreateRoom"
  | "DeleteRoom"
  | "CreateDispatch"
  | "ListParticipants"
  | "ListRooms"
  | "CreateSIPParticipant";

export interface RecordedLiveKitRequest {
  service: string;
  method: string;
  body: Record<string, unknown>;
  /** The bearer token as sent, and its verified claims (null when it did not verify). */
  token: string | null;
  claims: ClaimGrants | null;
  /** The HTTP status the fake answered (0 while it has not, or when it dropped the connection). */
  status: number;
  /** Arrival, on this process's performance clock (ms) and on the wall clock. */
  at: number;
  receivedAt: Date;
}

export type FakeParticipantKind = "STANDARD" | "AGENT" | "SIP";
export type FakeParticipantState = "JOINING" | "JOINED" | "ACTIVE" | "DISCONNECTED";

export interface FakeParticipant {
  sid: string;
  identity: string;
  kind: FakeParticipantKind;
  state: FakeParticipantState;
  attributes: Record<string, string>;
  /** Seconds since the epoch. */
  joinedAt: number;
}

export interface FakeRoom {
  sid: string;
  name: string;
  emptyTimeout: number;
  departureTimeout: number;
  maxParticipants: number;
  metadata: string;
  /** Seconds since the epoch (a test may date it back). */
  creationTime: number;
  participants: Map<string, FakeParticipant>;
}

export interface FakeDispatch {
  id: string;
  room: string;
  agentName: string;
  metadata: string;
}

/**
 * What the dialled number does, as LiveKit SIP reports it:
 * - `answer`: picks up after `afterMs` (default 200 ms); with `hangUpBeforeAnswer`, the callee hangs up
 *   at once, before LiveKit's answer to the dial goes out: it leaves the room, and LiveKit's signed
 *   `participant_left` webhook is handed to that function (which delivers it), then the answer follows;
 * - `sip_error`: the carrier answers with this SIP status (486, 480, 408, 603, …) after `afterMs`:
 *   a Twirp error whose metadata carries `sip_status_code` and `sip_status`;
 * - `error`: a failure without SIP status (e.g. 503 `unavailable`, 404 `not_found` for a trunk);
 * - `drop`: the connection is closed without an answer;
 * - `hang`: never answers, until `releaseDials()`, its room's deletion or `close()`;
 * - `ring_timeout`: rings through the request's ringing timeout (× `timeScale`), then LiveKit gives up.
 */
export type DialScript =
  | {
      kind: "answer";
      afterMs?: number;
      hangUpBeforeAnswer?: (webhook: { body: string; headers: Record<string, string> }) => Promise<unknown>;
    }
  | { kind: "sip_error"; sipStatus: number; reason?: string; afterMs?: number }
  | { kind: "error"; status: number; code: string; msg?: string; afterMs?: number }
  | { kind: "drop"; afterMs?: number }
  | { kind: "hang" }
  | { kind: "ring_timeout" };

/** One CreateSIPParticipant that reached the SIP service (authenticated and valid): one dial. */
export interface FakeDial {
  identity: string;
  room: string;
  to: string;
  from: string | null;
  trunkId: string;
  ringingTimeoutSeconds: number | null;
  maxCallDurationSeconds: number | null;
  waitUntilAnswered: boolean;
  at: number;
  receivedAt: Date;
  /** `sip.callStatus` while it lasts, then how it ended. */
  state: "dialing" | "ringing" | "active" | "failed" | "hung_up";
}

export interface FakeLiveKit {
  /** http://127.0.0.1:<port>, as LIVEKIT_URL. */
  url: string;
  apiKey: string;
  apiSecret: string;
  /** LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET for parseEnv. */
  env: Record<string, string>;
  requests: RecordedLiveKitRequest[];
  rooms: Map<string, FakeRoom>;
  dispatches: FakeDispatch[];
  dials: FakeDial[];
  /** Region URLs served at /settings/regions (where the SDK looks for a region to fail over to). */
  regions: string[];
  /** Makes `method` fail with an HTTP 500 Twirp error, never answer, or drop the connection, until reset with null. */
  fail(method: TwirpMethod, how?: "error" | "hang" | "drop" | null): void;
  /** What dialling `to` does from now on (null: back to the default). */
  scriptDial(to: string, script: DialScript | null): void;
  /** What every number without a script does (initially: answer after 200 ms). */
  setDefaultDial(script: DialScript): void;
  /**
   * Ends the dials in flight (hanging ones included) as `script` says (default: answered now), or
   * those of them `which` picks.
   */
  releaseDials(script?: DialScript, which?: (dial: FakeDial) => boolean): void;
  /** How many times this participant identity was dialled. */
  dialCount(identity: string): number;
  /**
   * From now on every answered callee hangs up `afterMs` later: it leaves the room and LiveKit's
   * signed `participant_left` webhook is POSTed to `webhookUrl` (null: callees stay on the line).
   */
  hangUpAfter(opts: { afterMs: number; webhookUrl: string } | null): void;
  /** Puts a participant in a room (created if needed), e.g. the agent. */
  addParticipant(
    room: string,
    p: { identity: string; kind?: FakeParticipantKind; attributes?: Record<string, string> },
  ): FakeParticipant;
  /** A webhook as LiveKit sends it: JSON body and an Authorization JWT holding the body's sha256. */
  signWebhook(
    event: Record<string, unknown>,
    opts?: { secret?: string; apiKey?: string },
  ): Promise<{ body: string; headers: Record<string, string> }>;
  close(): Promise<void>;
}

/** Twirp error codes and their HTTP statuses (the Twirp specification). */
const TWIRP_STATUS: Record<string, number> = {
  canceled: 408,
  unknown: 500,
  invalid_argument: 400,
  malformed: 400,
  deadline_exceeded: 408,
  not_found: 404,
  bad_route: 404,
  already_exists: 409,
  permission_denied: 403,
  unauthenticated: 401,
  resource_exhausted: 429,
  failed_precondition: 412,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  dataloss: 500,
};

/**
 * The Twirp code LiveKit gives a failed dial's SIP status (its gRPC code for that status, see
 * SIPStatus.GRPCStatus in LiveKit's protocol), with its reason phrase.
 */
const SIP_STATUS: Record<number, [code: string, reason: string]> = {
  403: ["permission_denied", "Forbidden"],
  404: ["not_found", "Not Found"],
  408: ["deadline_exceeded", "Request Timeout"],
  480: ["resource_exhausted", "Temporarily Unavailable"],
  484: ["invalid_argument", "Address Incomplete"],
  486: ["resource_exhausted", "Busy Here"],
  487: ["aborted", "Request Terminated"],
  488: ["invalid_argument", "Not Acceptable Here"],
  500: ["failed_precondition", "Internal Server Error"],
  503: ["failed_precondition", "Service Unavailable"],
  504: ["deadline_exceeded", "Server Time-out"],
  600: ["resource_exhausted", "Busy Everywhere"],
  603: ["permission_denied", "Decline"],
  604: ["not_found", "Does Not Exist Anywhere"],
};

function sipStatusCode(sip: number): [code: string, reason: string] {
  const known = SIP_STATUS[sip];
  if (known) return known;
  if (sip >= 500 && sip < 600) return ["failed_precondition", "Server Error"];
  return ["invalid_argument", "Client Error"];
}

/** Grants LiveKit's RoomService, AgentDispatchService and SIP service require per method. */
function authorized(method: string, claims: ClaimGrants, body: Record<string, unknown>): boolean {
  const video = claims.video ?? {};
  switch (method) {
    case "CreateRoom":
    case "DeleteRoom":
      return video.roomCreate === true;
    case "ListRooms":
      return video.roomList === true;
    case "CreateDispatch":
    case "ListParticipants":
      return video.roomAdmin === true && typeof body.room === "string" && video.room === body.room;
    case "CreateSIPParticipant":
      return claims.sip?.call === true;
    default:
      return false;
  }
}

function twirpError(status: number, code: string, msg: string, meta?: Record<string, string>): Response {
  // The SDK only parses the error body when the content type is exactly application/json.
  return new Response(JSON.stringify(meta ? { code, msg, meta } : { code, msg }), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function twirpJson(body: unknown): Response {
  return new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });
}

const dropped = new WeakSet<Response>();

/** Closes the connection before any byte of an answer: the client sees a reset, not a status. */
function dropConnection(): Response {
  const res = new Response(
    new ReadableStream({
      start(c) {
        c.error();
      },
    }),
  );
  dropped.add(res);
  return res;
}

/** A protobuf JSON field, under its JSON name or its proto name (both are accepted by LiveKit). */
function field(body: Record<string, unknown>, json: string, proto: string): unknown {
  return body[json] ?? body[proto];
}

/** A protobuf Duration in JSON ("30s", "1.5s") in seconds, or null. */
function durationSeconds(v: unknown): number | null {
  const m = typeof v === "string" ? /^(\d+(?:\.\d+)?)s$/.exec(v) : null;
  return m ? Number(m[1]) : null;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** How an in-flight dial ends: a script's verdict, the room closing, or the fake shutting down. */
type DialEnding = DialScript | { kind: "room_closed" } | { kind: "shutdown" };

export async function startFakeLiveKit(
  opts: {
    apiKey?: string;
    apiSecret?: string;
    /** Scales the ringing timeout a `ring_timeout` dial rings through (e.g. 0.01: 30 s → 300 ms). */
    timeScale?: number;
    /** After this many ms a dial that has not ended yet is `ringing` (default 20). */
    ringingAfterMs?: number;
  } = {},
): Promise<FakeLiveKit> {
  const apiKey = opts.apiKey ?? "APIfake";
  const apiSecret = opts.apiSecret ?? "fake-livekit-secret-that-is-long-enough-0123456789";
  const timeScale = opts.timeScale ?? 1;
  const ringingAfterMs = opts.ringingAfterMs ?? 20;
  const requests: RecordedLiveKitRequest[] = [];
  const rooms = new Map<string, FakeRoom>();
  const dispatches: FakeDispatch[] = [];
  const dials: FakeDial[] = [];
  const failures = new Map<string, "error" | "hang" | "drop">();
  const hanging = new Set<() => void>();
  /** Dials in flight, by the function that ends them. */
  const inflight = new Map<(ending: DialEnding) => void, FakeDial>();
  const scripts = new Map<string, DialScript>();
  let defaultDial: DialScript = { kind: "answer", afterMs: 200 };
  let hangUp: { afterMs: number; webhookUrl: string } | null = null;
  /** Webhooks being sent, so close() can wait for them. */
  const sending = new Set<Promise<unknown>>();
  let seq = 0;

  function ensureRoom(name: string): FakeRoom {
    let room = rooms.get(name);
    if (!room) {
      // LiveKit creates a room when a participant joins one that does not exist.
      room = {
        sid: `RM_${++seq}`,
        name,
        emptyTimeout: 0,
        departureTimeout: 0,
        maxParticipants: 0,
        metadata: "",
        creationTime: nowSeconds(),
        participants: new Map(),
      };
      rooms.set(name, room);
    }
    return room;
  }

  function addParticipant(
    roomName: string,
    p: { identity: string; kind?: FakeParticipantKind; attributes?: Record<string, string> },
  ): FakeParticipant {
    const participant: FakeParticipant = {
      sid: `PA_${++seq}`,
      identity: p.identity,
      kind: p.kind ?? "STANDARD",
      state: "ACTIVE",
      attributes: { ...p.attributes },
      joinedAt: nowSeconds(),
    };
    ensureRoom(roomName).participants.set(p.identity, participant);
    return participant;
  }

  /** A room in protobuf JSON (int64 as strings). */
  function roomJson(room: FakeRoom) {
    const { participants, creationTime, ...info } = room;
    return { ...info, numParticipants: participants.size, creationTime: String(creationTime) };
  }

  function participantJson(p: FakeParticipant) {
    return {
      sid: p.sid,
      identity: p.identity,
      state: p.state,
      kind: p.kind,
      attributes: p.attributes,
      joinedAt: String(p.joinedAt),
      isPublisher: p.state === "ACTIVE",
    };
  }

  /**
   * Dials the callee as LiveKit SIP does: the participant joins the room at once with
   * `sip.callStatus` `dialing`, turns `ringing`, then `active` on answer or leaves on failure.
   * With `wait_until_answered` the answer waits for the outcome; otherwise it comes at once.
   */
  async function dial(body: Record<string, unknown>, record: RecordedLiveKitRequest): Promise<Response> {
    const trunkId = String(field(body, "sipTrunkId", "sip_trunk_id") ?? "");
    const to = String(field(body, "sipCallTo", "sip_call_to") ?? "");
    const roomName = String(field(body, "roomName", "room_name") ?? "");
    if (!trunkId) return twirpError(400, "invalid_argument", "missing sip trunk id");
    if (!to) return twirpError(400, "invalid_argument", "missing sip callee number");
    if (!roomName) return twirpError(400, "invalid_argument", "missing room name");
    const from = field(body, "sipNumber", "sip_number");
    const d: FakeDial = {
      identity: String(field(body, "participantIdentity", "participant_identity") ?? "sip-participant"),
      room: roomName,
      to,
      from: typeof from === "string" && from ? from : null,
      trunkId,
      ringingTimeoutSeconds: durationSeconds(field(body, "ringingTimeout", "ringing_timeout")),
      maxCallDurationSeconds: durationSeconds(field(body, "maxCallDuration", "max_call_duration")),
      waitUntilAnswered: field(body, "waitUntilAnswered", "wait_until_answered") === true,
      at: record.at,
      receivedAt: record.receivedAt,
      state: "dialing",
    };
    dials.push(d);
    const sipCallId = `SCL_${++seq}`;
    const participant = addParticipant(roomName, {
      identity: d.identity,
      kind: "SIP",
      attributes: {
        "sip.callID": sipCallId,
        "sip.callStatus": "dialing",
        "sip.phoneNumber": to,
        "sip.trunkID": trunkId,
        ...(d.from ? { "sip.trunkPhoneNumber": d.from } : {}),
      },
    });
    participant.state = "JOINED";
    const setStatus = (status: "ringing" | "active") => {
      d.state = status;
      participant.attributes["sip.callStatus"] = status;
      if (status === "active") participant.state = "ACTIVE";
    };
    const leave = () => rooms.get(roomName)?.participants.delete(d.identity);

    const script = scripts.get(to) ?? defaultDial;
    const timers: ReturnType<typeof setTimeout>[] = [];
    const ending = new Promise<DialEnding>((resolve) => {
      const end = (e: DialEnding) => {
        inflight.delete(end);
        for (const t of timers) clearTimeout(t);
        resolve(e);
      };
      inflight.set(end, d);
      timers.push(setTimeout(() => d.state === "dialing" && setStatus("ringing"), ringingAfterMs));
      if (script.kind === "hang") return;
      const ms =
        script.kind === "ring_timeout"
          ? (d.ringingTimeoutSeconds ?? 30) * 1000 * timeScale
          : (script.afterMs ?? (script.kind === "answer" ? 200 : 0));
      timers.push(setTimeout(() => end(script), ms));
    });

    const outcome = ending.then(async (e): Promise<Response> => {
      if (e.kind === "answer") {
        setStatus("active");
        if (e.hangUpBeforeAnswer) {
          leave();
          d.state = "hung_up";
          await e.hangUpBeforeAnswer(
            await handle.signWebhook(liveKitEvents.participantLeft(roomName, d.identity)),
          );
        } else if (hangUp) scheduleHangUp(hangUp, roomName, d);
        return twirpJson({
          participantId: participant.sid,
          participantIdentity: d.identity,
          roomName,
          sipCallId,
        });
      }
      leave();
      d.state = e.kind === "room_closed" ? "hung_up" : "failed";
      switch (e.kind) {
        case "sip_error": {
          const [code, reason] = sipStatusCode(e.sipStatus);
          const phrase = e.reason ?? reason;
          return twirpError(TWIRP_STATUS[code] ?? 500, code, `sip status ${e.sipStatus}: ${phrase}`, {
            sip_status_code: String(e.sipStatus),
            sip_status: phrase,
          });
        }
        case "error":
          return twirpError(e.status, e.code, e.msg ?? `simulated ${e.code}`);
        case "drop":
          return dropConnection();
        case "shutdown":
          return twirpError(503, "unavailable", "service shutting down");
        // LiveKit SIP gives up the INVITE when its context ends: the ringing timeout, or the
        // participant disconnected because the room closed. Both answer Twirp `canceled`.
        default:
          return twirpError(408, "canceled", "sip request timed out");
      }
    });
    if (!d.waitUntilAnswered) {
      void outcome;
      return twirpJson({
        participantId: participant.sid,
        participantIdentity: d.identity,
        roomName,
        sipCallId,
      });
    }
    return outcome;
  }

  /** The callee hangs up: it leaves the room, and LiveKit tells the service by webhook. */
  function scheduleHangUp(opts: { afterMs: number; webhookUrl: string }, roomName: string, d: FakeDial) {
    setTimeout(() => {
      if (!rooms.get(roomName)?.participants.delete(d.identity)) return;
      d.state = "hung_up";
      const send = (async () => {
        const { body, headers } = await handle.signWebhook(
          liveKitEvents.participantLeft(roomName, d.identity),
        );
        await fetch(opts.webhookUrl, { method: "POST", body, headers }).then((r) => r.arrayBuffer());
      })()
        .catch(() => {})
        .finally(() => sending.delete(send));
      sending.add(send);
    }, opts.afterMs);
  }

  function endDialsIn(roomName: string) {
    for (const [end, d] of inflight) if (d.room === roomName) end({ kind: "room_closed" });
  }

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    // A dial may last the whole ringing timeout.
    idleTimeout: 0,
    fetch: async (req) => {
      const at = performance.now();
      const receivedAt = new Date();
      const url = new URL(req.url);
      if (req.method === "GET" && url.pathname === "/settings/regions") {
        return Response.json({
          regions: handle.regions.map((u, i) => ({ region: `region-${i}`, url: u, distance: String(i) })),
        });
      }
      const match = /^\/twirp\/livekit\.(\w+)\/(\w+)$/.exec(url.pathname);
      if (req.method !== "POST" || !match) return twirpError(404, "bad_route", "no such route");
      const [, service, method] = match as unknown as [string, string, string];
      let body: Record<string, unknown> = {};
      try {
        body = (await req.json()) as Record<string, unknown>;
      } catch {
        return twirpError(400, "malformed", "body is not JSON");
      }
      const record: RecordedLiveKitRequest = {
        service,
        method,
        body,
        token: null,
        claims: null,
        status: 0,
        at,
        receivedAt,
      };
      requests.push(record);
      const answer = (res: Response) => {
        record.status = dropped.has(res) ? 0 : res.status;
        return res;
      };

      const auth = req.headers.get("authorization") ?? "";
      record.token = /^Bearer (.+)$/.exec(auth)?.[1] ?? null;
      // Checked as LiveKit checks it: HS256 with the API secret, issued by the API key, within its times.
      // With node:crypto, not the SDK's TokenVerifier (jose imports a Web Crypto key per token, about
      // 100 µs each: a tenth of a core of the machine a benchmark shares, at 500 calls a second); the
      // SDK's verifier checks the tokens recorded here in tests/livekit/client.test.ts.
      record.claims = record.token ? verifyToken({ apiKey, apiSecret }, record.token, Date.now()) : null;
      if (!record.claims) return answer(twirpError(401, "unauthenticated", "invalid token"));
      if (!authorized(method, record.claims, body)) {
        return answer(twirpError(403, "permission_denied", "permissions denied"));
      }

      const failure = failures.get(method);
      if (failure === "hang") {
        await new Promise<void>((resolve) => hanging.add(resolve));
        return answer(twirpError(503, "unavailable", "shutting down"));
      }
      if (failure === "error") return answer(twirpError(500, "internal", "simulated failure"));
      if (failure === "drop") return answer(dropConnection());

      if (service === "RoomService" && method === "CreateRoom") {
        const name = String(body.name ?? "");
        if (!name) return answer(twirpError(400, "invalid_argument", "name is required"));
        let room = rooms.get(name);
        if (!room) {
          room = {
            sid: `RM_${++seq}`,
            name,
            emptyTimeout: Number(body.emptyTimeout ?? 0),
            departureTimeout: Number(body.departureTimeout ?? 0),
            maxParticipants: Number(body.maxParticipants ?? 0),
            metadata: String(body.metadata ?? ""),
            creationTime: nowSeconds(),
            participants: new Map(),
          };
          rooms.set(name, room);
        }
        return answer(twirpJson(roomJson(room)));
      }
      if (service === "RoomService" && method === "ListRooms") {
        const names = Array.isArray(body.names) ? body.names.map(String) : null;
        const listed = [...rooms.values()].filter((r) => !names?.length || names.includes(r.name));
        return answer(twirpJson({ rooms: listed.map(roomJson) }));
      }
      if (service === "RoomService" && method === "DeleteRoom") {
        const name = String(body.room ?? "");
        if (!rooms.delete(name)) return answer(twirpError(404, "not_found", "requested room does not exist"));
        // Everyone is disconnected; a callee whose phone still rings is hung up.
        endDialsIn(name);
        return answer(twirpJson({}));
      }
      if (service === "RoomService" && method === "ListParticipants") {
        // LiveKit answers an empty list for a room it does not know.
        const room = rooms.get(String(body.room ?? ""));
        return answer(
          twirpJson({ participants: [...(room?.participants.values() ?? [])].map(participantJson) }),
        );
      }
      if (service === "AgentDispatchService" && method === "CreateDispatch") {
        const dispatch: FakeDispatch = {
          id: `AD_${++seq}`,
          room: String(body.room ?? ""),
          agentName: String(body.agentName ?? ""),
          metadata: String(body.metadata ?? ""),
        };
        dispatches.push(dispatch);
        return answer(twirpJson(dispatch));
      }
      if (service === "SIP" && method === "CreateSIPParticipant") return answer(await dial(body, record));
      return answer(twirpError(404, "bad_route", `no handler for ${service}/${method}`));
    },
  });

  const url = `http://127.0.0.1:${server.port}`;
  const handle: FakeLiveKit = {
    url,
    apiKey,
    apiSecret,
    env: { LIVEKIT_URL: url, LIVEKIT_API_KEY: apiKey, LIVEKIT_API_SECRET: apiSecret },
    requests,
    rooms,
    dispatches,
    dials,
    regions: [],
    fail(method, how = "error") {
      if (how) failures.set(method, how);
      else failures.delete(method);
    },
    scriptDial(to, script) {
      if (script) scripts.set(to, script);
      else scripts.delete(to);
    },
    setDefaultDial(script) {
      defaultDial = script;
    },
    releaseDials(script = { kind: "answer" }, which = () => true) {
      for (const [end, dial] of [...inflight]) if (which(dial)) end(script);
    },
    dialCount(identity) {
      return dials.filter((d) => d.identity === identity).length;
    },
    hangUpAfter(opts) {
      hangUp = opts;
    },
    addParticipant,
    async signWebhook(event, o = {}) {
      const body = JSON.stringify(event);
      // As LiveKit signs its webhooks: the body's SHA-256 in a token of the API key, valid 5 minutes.
      const token = signToken(
        { apiKey: o.apiKey ?? apiKey, apiSecret: o.secret ?? apiSecret },
        { sha256: bodyDigest(body) },
        { ttlSeconds: 300, nowMs: Date.now() },
      );
      return { body, headers: { "content-type": "application/webhook+json", authorization: token } };
    },
    async close() {
      hangUp = null;
      await Promise.allSettled([...sending]);
      for (const release of hanging) release();
      for (const end of [...inflight.keys()]) end({ kind: "shutdown" });
      await server.stop(true);
    },
  };
  return handle;
}

/** LiveKit's webhook `createdAt`: whole seconds since the epoch, as a string (protobuf JSON int64). */
function createdAtSeconds(at: Date | number | undefined): string {
  if (at === undefined) return String(nowSeconds());
  const ms = at instanceof Date ? at.getTime() : at * 1000;
  return String(Math.floor(ms / 1000));
}

/**
 * Webhook events in LiveKit's JSON form (protobuf JSON: camelCase, int64 as strings). `createdAt`
 * is a Date or seconds since the epoch (default: now).
 */
export const liveKitEvents = {
  participantJoined(
    roomName: string,
    identity: string,
    kind: FakeParticipantKind = "STANDARD",
    opts: { createdAt?: Date | number } = {},
  ) {
    return {
      id: `EV_${crypto.randomUUID().slice(0, 12)}`,
      event: "participant_joined",
      createdAt: createdAtSeconds(opts.createdAt),
      room: { sid: "RM_1", name: roomName },
      participant: { sid: `PA_${identity}`, identity, kind, state: "ACTIVE" },
    };
  },
  /** A participant left the room; for the callee of a phone call, kind `SIP` and identity `sip_<call id>`. */
  participantLeft(
    roomName: string,
    identity: string,
    opts: { kind?: FakeParticipantKind; createdAt?: Date | number } = {},
  ) {
    const kind = opts.kind ?? "SIP";
    return {
      id: `EV_${crypto.randomUUID().slice(0, 12)}`,
      event: "participant_left",
      createdAt: createdAtSeconds(opts.createdAt),
      room: { sid: "RM_1", name: roomName },
      participant: {
        sid: `PA_${identity}`,
        identity,
        kind,
        state: "DISCONNECTED",
        ...(kind === "SIP" ? { attributes: { "sip.callStatus": "hangup" } } : {}),
      },
    };
  },
  roomFinished(roomName: string, opts: { createdAt?: Date | number } = {}) {
    return {
      id: `EV_${crypto.randomUUID().slice(0, 12)}`,
      event: "room_finished",
      createdAt: createdAtSeconds(opts.createdAt),
      room: { sid: "RM_1", name: roomName },
    };
  },
};
