import type { WebhookEvent } from "livekit-server-sdk";
import { AccessToken, AgentDispatchClient, RoomServiceClient, WebhookReceiver } from "livekit-server-sdk";
import type { Env } from "../env.ts";

/**
 * The media server (LiveKit), reached with livekit-server-sdk: rooms through RoomService, the agent
 * through AgentDispatchService, the visitor's access token, and verification of LiveKit's webhooks.
 * Live web calls need all three of LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET.
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

/** LiveKit's name for an agent (CONTRACT.md §8): its `livekitAgentName`, or else its id. */
export function liveKitAgentName(agent: { id: string; livekit_agent_name: string | null }): string {
  return agent.livekit_agent_name || agent.id;
}

/** The visitor's access token never outlives this (CONTRACT.md §4: at most 10 minutes). */
export const PARTICIPANT_TOKEN_TTL_SECONDS = 600;
/** Seconds a room waits for its first participant before LiveKit closes it. */
export const ROOM_EMPTY_TIMEOUT_SECONDS = 120;
/** Seconds a room stays open after the last participant leaves. */
export const ROOM_DEPARTURE_TIMEOUT_SECONDS = 20;
/** The visitor and the agent. */
export const ROOM_MAX_PARTICIPANTS = 2;
/** A media server slower than this is a failed start (502 `call_start_failed`), not a hung request. */
const REQUEST_TIMEOUT_SECONDS = 8;

/** Starting a call failed at the media server; the caller answers 502 `call_start_failed`. */
export class LiveKitError extends Error {
  constructor(step: string, cause: unknown) {
    super(`${step} failed: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "LiveKitError";
  }
}

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
}

export class LiveKit {
  readonly config: LiveKitConfig;
  readonly #rooms: RoomServiceClient;
  readonly #dispatch: AgentDispatchClient;
  readonly #webhooks: WebhookReceiver;

  constructor(config: LiveKitConfig, opts: { requestTimeoutSeconds?: number } = {}) {
    this.config = config;
    const options = {
      requestTimeout: opts.requestTimeoutSeconds ?? REQUEST_TIMEOUT_SECONDS,
      failover: false,
    };
    this.#rooms = new RoomServiceClient(config.url, config.apiKey, config.apiSecret, options);
    this.#dispatch = new AgentDispatchClient(config.url, config.apiKey, config.apiSecret, options);
    this.#webhooks = new WebhookReceiver(config.apiKey, config.apiSecret);
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
    try {
      await this.#rooms.createRoom({
        name,
        emptyTimeout: ROOM_EMPTY_TIMEOUT_SECONDS,
        departureTimeout: ROOM_DEPARTURE_TIMEOUT_SECONDS,
        maxParticipants: ROOM_MAX_PARTICIPANTS,
        metadata: JSON.stringify({ callId: input.callId }),
      });
    } catch (err) {
      throw new LiveKitError("CreateRoom", err);
    }
    let step = "CreateDispatch";
    try {
      await this.#dispatch.createDispatch(name, input.agentName, {
        metadata: JSON.stringify({ callId: input.callId, variables: input.variables }),
      });
      step = "AccessToken";
      const participantToken = await this.participantToken(name, `visitor-${input.callId}`);
      return { name, serverUrl: clientServerUrl(this.config.url), participantToken };
    } catch (err) {
      await this.deleteRoom(name).catch(() => {});
      throw new LiveKitError(step, err);
    }
  }

  /** A token that joins this one room only: publish and subscribe, nothing administrative. */
  async participantToken(room: string, identity: string): Promise<string> {
    const at = new AccessToken(this.config.apiKey, this.config.apiSecret, {
      identity,
      ttl: PARTICIPANT_TOKEN_TTL_SECONDS,
    });
    at.addGrant({ roomJoin: true, room, canPublish: true, canSubscribe: true });
    return at.toJwt();
  }

  /** Closes a room and disconnects everyone in it (the `maxSeconds` timer of a call). */
  async deleteRoom(name: string): Promise<void> {
    try {
      await this.#rooms.deleteRoom(name);
    } catch (err) {
      throw new LiveKitError("DeleteRoom", err);
    }
  }

  /**
   * Verifies a webhook from LiveKit: the Authorization header is a JWT signed with the API secret whose
   * `sha256` claim is the body's digest. Returns the event, or null when anything does not check out.
   */
  async receiveWebhook(body: string, authorization: string | undefined): Promise<WebhookEvent | null> {
    if (!authorization) return null;
    const jwt = authorization.replace(/^Bearer\s+/i, "");
    try {
      return await this.#webhooks.receive(body, jwt);
    } catch {
      return null;
    }
  }
}

/** The LiveKit client for this environment, or null when it is not configured. */
export function createLiveKit(env: Pick<Env, "LIVEKIT_URL" | "LIVEKIT_API_KEY" | "LIVEKIT_API_SECRET">) {
  const config = liveKitConfig(env);
  return config ? new LiveKit(config) : null;
}
