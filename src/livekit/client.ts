import type { ClaimGrants, SIPGrant, VideoGrant } from "livekit-server-sdk";
import { AgentDispatchClient, RoomServiceClient, SipClient, WebhookEvent } from "livekit-server-sdk";
import type { Env } from "../env.ts";
import { LiveKitError, type LiveKitStep } from "./errors.ts";
import { RINGING_TIMEOUT_SECONDS, type RoomParticipant, sipIdentity } from "./sip.ts";
import { bodyDigest, signToken, type TokenKey, verifyToken } from "./tokens.ts";

export { LiveKitError } from "./errors.ts";

/**
 * The media server (LiveKit), reached with livekit-server-sdk: rooms and their participants through
 * RoomService, the agent through AgentDispatchService, phone calls through the SIP service, the
 * visitor's access token, and verification of LiveKit's webhooks. Every failure is a LiveKitError.
 * Live calls need all three of LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET.
 */

export interface LiveKitConfig {
  url: string;
  apiKey: string;
  apiSecret: string;
}

/** The configuration, or null when live web calls cannot be served (they answer 503 `agent_unavailable`). */
export function liveKitConfig(
  env: Pick<Env, "LIVEKIT_URL" | "LIVEKIT_API_KEY" | "LIVEKIT_API_SECRET">,
): LiveKitConfig | null {
  if (!env.LIVEKIT_URL || !env.LIVEKIT_API_KEY || !env.LIVEKIT_API_SECRET) return null;
  return { url: env.LIVEKIT_URL, apiKey: env.LIVEKIT_API_KEY, apiSecret: env.LIVEKIT_API_SECRET };
}

/** The URL a client connects to: LIVEKIT_URL with `http` → `ws` and `https` → `wss`. */
export function clientServerUrl(url: string): string {
  return url.replace(/^http(s?):\/\//i, (_, s: string) => (s ? "wss://" : "ws://"));
}

/** LiveKit's name for an agent: its `livekitAgentName`, or else its id. */
export function liveKitAgentName(agent: { id: string; livekit_agent_name: string | null }): string {
  return agent.livekit_agent_name || agent.id;
}

/** The visitor's access token never outlives this (at most 10 minutes). */
export const PARTICIPANT_TOKEN_TTL_SECONDS = 600;
/** Seconds a room waits for its first participant before LiveKit closes it. */
export const ROOM_EMPTY_TIMEOUT_SECONDS = 120;
/** Seconds a room stays open after the last participant leaves. */
export const ROOM_DEPARTURE_TIMEOUT_SECONDS = 20;
/** The caller (visitor or callee) and the agent. */
export const ROOM_MAX_PARTICIPANTS = 2;
/** A media server slower than this is a failed request (502 `call_start_failed`), not a hung one. */
const REQUEST_TIMEOUT_SECONDS = 8;
/**
 * A dial waits for the callee: LiveKit answers when the phone is picked up, refused, or has rung for
 * the ringing timeout. After an answer the callee still has to join the room before LiveKit replies,
 * so the request may last this long past the ringing timeout (the SDK's own floor is 2 s; LiveKit's
 * server allows itself 80 s in all).
 */
export const DIAL_ANSWER_MARGIN_SECONDS = 20;
export const DIAL_REQUEST_TIMEOUT_SECONDS = RINGING_TIMEOUT_SECONDS + DIAL_ANSWER_MARGIN_SECONDS;

export interface WebCallRoom {
  name: string;
  serverUrl: string;
  participantToken: string;
}

export interface StartRoomInput {
  callId: string;
  /** LiveKit's agent name: the agent's `livekitAgentName`, or its id. */
  agentName: string;
  /** The call's variables, for the agent only (dispatch metadata never reaches the browser). */
  variables: Record<string, unknown>;
  /** The call's `maxSeconds`: the visitor's token lives no longer than the call may (plus a minute to connect). */
  maxSeconds: number;
}

/** Seconds a visitor's token outlives the call's `maxSeconds`: time to connect. */
export const PARTICIPANT_TOKEN_GRACE_SECONDS = 60;

/** The visitor's participant identity in a web call's room. */
export function visitorIdentity(callId: string): string {
  return `visitor-${callId}`;
}

export interface CreateRoomOptions {
  /** Room metadata, visible to every participant (the browser too): never the call's variables. */
  metadata?: Record<string, unknown>;
  emptyTimeoutSeconds?: number;
  departureTimeoutSeconds?: number;
  maxParticipants?: number;
}

export interface DialSipInput {
  callId: string;
  roomName: string;
  /** The outbound SIP trunk (`ST_…`). */
  trunkId: string;
  /** The callee, E.164. */
  to: string;
  /** The caller number shown to the callee (E.164), or null for the trunk's own. */
  from: string | null;
  /** LiveKit hangs up the call after this many seconds. */
  maxSeconds: number;
}

/** The callee's participant, once the call is answered. */
export interface AnsweredSipCall {
  participantId: string;
  participantIdentity: string;
  roomName: string;
  sipCallId: string;
}

/** A room as LiveKit knows it (ListRooms). */
export interface RoomInfo {
  /** When LiveKit created it, or null when it did not say. */
  createdAt: Date | null;
  /** Seconds it waits for its first participant before LiveKit closes it. */
  emptyTimeoutSeconds: number;
  numParticipants: number;
}

/** DeleteRoom's answer: the room was closed now, or LiveKit no longer knew it (closed before). */
export type DeleteRoomResult = "deleted" | "already_closed";

/** The SDK's lifetime of the tokens it signs for its requests. */
const REQUEST_TOKEN_TTL_SECONDS = 600;

type AuthHeader = (grant: VideoGrant, sip?: SIPGrant) => Promise<Record<string, string>>;

/**
 * The SDK client signs each request's token with ours (tokens.ts): the same claims its AccessToken
 * would sign, at a fraction of the cost. LiveKit checks the times against its own clock: the wall
 * clock's, never a test's.
 */
function signedWith<T extends { authHeader: AuthHeader }>(client: T, key: TokenKey): T {
  client.authHeader = async (grant, sip) => {
    const grants: ClaimGrants = {};
    if (grant) grants.video = { ...grant };
    if (sip) grants.sip = { ...sip };
    const token = signToken(key, grants, { ttlSeconds: REQUEST_TOKEN_TTL_SECONDS, nowMs: Date.now() });
    return { Authorization: `Bearer ${token}` };
  };
  return client;
}

export class LiveKit {
  readonly config: LiveKitConfig;
  readonly #rooms: RoomServiceClient;
  readonly #dispatch: AgentDispatchClient;
  readonly #sip: SipClient;

  constructor(config: LiveKitConfig, opts: { requestTimeoutSeconds?: number } = {}) {
    this.config = config;
    // Failover off: on a 5xx or a dropped connection the SDK would replay the request against another
    // region (LiveKit Cloud), and a replayed CreateSIPParticipant dials the callee a second time.
    const options = {
      requestTimeout: opts.requestTimeoutSeconds ?? REQUEST_TIMEOUT_SECONDS,
      failover: false,
    };
    this.#rooms = signedWith(
      new RoomServiceClient(config.url, config.apiKey, config.apiSecret, options),
      config,
    );
    this.#dispatch = signedWith(
      new AgentDispatchClient(config.url, config.apiKey, config.apiSecret, options),
      config,
    );
    this.#sip = signedWith(new SipClient(config.url, config.apiKey, config.apiSecret, options), config);
  }

  /** The room name of a call: the call id, so webhooks about the room lead straight to the call. */
  static roomName(callId: string): string {
    return callId;
  }

  /**
   * Creates the call's room, dispatches the agent into it and signs the visitor's token. When a step
   * fails, a room already created is deleted (best effort) and a LiveKitError is thrown.
   */
  async startWebCall(input: StartRoomInput): Promise<WebCallRoom> {
    const name = LiveKit.roomName(input.callId);
    await this.createRoom(name, { metadata: { callId: input.callId } });
    try {
      await this.dispatchAgent(name, input.agentName, { callId: input.callId, variables: input.variables });
      const participantToken = await this.participantToken(
        name,
        visitorIdentity(input.callId),
        Math.min(PARTICIPANT_TOKEN_TTL_SECONDS, input.maxSeconds + PARTICIPANT_TOKEN_GRACE_SECONDS),
      );
      return { name, serverUrl: clientServerUrl(this.config.url), participantToken };
    } catch (err) {
      await this.deleteRoom(name).catch(() => {});
      throw err;
    }
  }

  /** Creates a room (CreateRoom). Creating a room that exists returns it unchanged. */
  async createRoom(name: string, opts: CreateRoomOptions = {}): Promise<void> {
    await this.#call("CreateRoom", () =>
      this.#rooms.createRoom({
        name,
        emptyTimeout: opts.emptyTimeoutSeconds ?? ROOM_EMPTY_TIMEOUT_SECONDS,
        departureTimeout: opts.departureTimeoutSeconds ?? ROOM_DEPARTURE_TIMEOUT_SECONDS,
        maxParticipants: opts.maxParticipants ?? ROOM_MAX_PARTICIPANTS,
        metadata: opts.metadata ? JSON.stringify(opts.metadata) : undefined,
      }),
    );
  }

  /**
   * Sends the agent into the room (CreateDispatch). `metadata` reaches the agent only: a web call's
   * `{callId, variables}`, a phone call's `{callId, variables, direction: "outbound", to}`.
   * Returns the dispatch id.
   */
  async dispatchAgent(room: string, agentName: string, metadata: Record<string, unknown>): Promise<string> {
    const dispatch = await this.#call("CreateDispatch", () =>
      this.#dispatch.createDispatch(room, agentName, { metadata: JSON.stringify(metadata) }),
    );
    return dispatch.id;
  }

  /**
   * Dials the callee into the room (CreateSIPParticipant) and waits until the phone is answered. The
   * request may last the ringing timeout and then some; it is sent once, never replayed. Throws a
   * LiveKitError when the dial fails: `dialFailureEnd()` tells how that ends the call. After a local
   * `timeout` or `network_error` LiveKit may still have connected the callee: `listParticipants`
   * (see `sipCallAnswered`) tells, and deleting the room hangs up.
   */
  async dialSip(input: DialSipInput): Promise<AnsweredSipCall> {
    if (!Number.isInteger(input.maxSeconds) || input.maxSeconds < 1) {
      throw new RangeError(`maxSeconds must be a positive integer, got ${input.maxSeconds}`);
    }
    const info = await this.#call("CreateSIPParticipant", () =>
      this.#sip.createSipParticipant(input.trunkId, input.to, input.roomName, {
        fromNumber: input.from ?? undefined,
        participantIdentity: sipIdentity(input.callId),
        waitUntilAnswered: true,
        ringingTimeout: RINGING_TIMEOUT_SECONDS,
        maxCallDuration: input.maxSeconds,
        timeout: DIAL_REQUEST_TIMEOUT_SECONDS,
      }),
    );
    return {
      participantId: info.participantId,
      participantIdentity: info.participantIdentity,
      roomName: info.roomName,
      sipCallId: info.sipCallId,
    };
  }

  /** Who is in the room, with their attributes. A room LiveKit does not know has nobody in it. */
  async listParticipants(roomName: string): Promise<RoomParticipant[]> {
    let participants: Awaited<ReturnType<RoomServiceClient["listParticipants"]>>;
    try {
      participants = await this.#rooms.listParticipants(roomName);
    } catch (err) {
      const e = this.#error("ListParticipants", err);
      if (e.code === "not_found") return [];
      throw e;
    }
    return participants.map((p) => {
      // Protobuf JSON names the enums (kind `SIP`, state `ACTIVE`) and leaves out their zero values.
      const json = p.toJson() as { kind?: string; state?: string };
      const joinedAt = Number(p.joinedAtMs) || Number(p.joinedAt) * 1000;
      return {
        identity: p.identity,
        kind: json.kind ?? "STANDARD",
        state: json.state ?? "JOINING",
        attributes: { ...p.attributes },
        joinedAt: joinedAt > 0 ? new Date(joinedAt) : null,
      };
    });
  }

  /** The room, or null when LiveKit has none of that name (never created, or closed). */
  async findRoom(name: string): Promise<RoomInfo | null> {
    const [room] = await this.#call("ListRooms", () => this.#rooms.listRooms([name]));
    if (!room || room.name !== name) return null;
    const createdMs = Number(room.creationTimeMs) || Number(room.creationTime) * 1000;
    return {
      createdAt: createdMs > 0 ? new Date(createdMs) : null,
      emptyTimeoutSeconds: room.emptyTimeout,
      numParticipants: room.numParticipants,
    };
  }

  /**
   * A token that joins this one room only: publish and subscribe, nothing administrative. It lives
   * `ttlSeconds`, never more than 10 minutes.
   */
  async participantToken(
    room: string,
    identity: string,
    ttlSeconds: number = PARTICIPANT_TOKEN_TTL_SECONDS,
  ): Promise<string> {
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1) {
      throw new RangeError(`ttlSeconds must be a positive integer, got ${ttlSeconds}`);
    }
    return this.#call("AccessToken", async () =>
      signToken(
        this.config,
        { video: { roomJoin: true, room, canPublish: true, canSubscribe: true } },
        { ttlSeconds: Math.min(ttlSeconds, PARTICIPANT_TOKEN_TTL_SECONDS), nowMs: Date.now(), identity },
      ),
    );
  }

  /**
   * Closes a room and disconnects everyone in it (a callee whose phone still rings is hung up).
   * A room LiveKit does not know (`not_found`) was closed already; any other failure is thrown.
   */
  async deleteRoom(name: string): Promise<DeleteRoomResult> {
    try {
      await this.#rooms.deleteRoom(name);
      return "deleted";
    } catch (err) {
      const e = this.#error("DeleteRoom", err);
      if (e.code === "not_found") return "already_closed";
      throw e;
    }
  }

  /**
   * Verifies a webhook from LiveKit: the Authorization header is a JWT signed with the API secret whose
   * `sha256` claim is the body's digest (`signs`). Returns the event, or null when the signature does not
   * check out or the body is no event the SDK can read (`signs` then tells which).
   */
  async receiveWebhook(body: string, authorization: string | undefined): Promise<WebhookEvent | null> {
    if (!this.signs(body, authorization)) return null;
    try {
      // What the SDK's WebhookReceiver reads once the signature checks out.
      return WebhookEvent.fromJson(JSON.parse(body), { ignoreUnknownFields: true });
    } catch {
      return null;
    }
  }

  /**
   * Whether `authorization` (the bare token LiveKit sends, or `Bearer <token>`) is a token of the API
   * secret, within its times, whose `sha256` claim is the body's digest.
   */
  signs(body: string, authorization: string | undefined): boolean {
    if (!authorization) return false;
    const claims = verifyToken(this.config, authorization.replace(/^Bearer\s+/i, ""), Date.now());
    return claims !== null && claims.sha256 === bodyDigest(body);
  }

  async #call<T>(step: LiveKitStep, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.#error(step, err);
    }
  }

  #error(step: LiveKitStep, err: unknown): LiveKitError {
    return LiveKitError.from(step, err, [this.config.apiSecret]);
  }
}

/** The LiveKit client for this environment, or null when it is not configured. */
export function createLiveKit(env: Pick<Env, "LIVEKIT_URL" | "LIVEKIT_API_KEY" | "LIVEKIT_API_SECRET">) {
  const config = liveKitConfig(env);
  return config ? new LiveKit(config) : null;
}
