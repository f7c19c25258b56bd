import { AccessToken, type ClaimGrants, TokenVerifier } from "livekit-server-sdk";

/**
 * A local stand-in for a LiveKit server's API: a real HTTP server speaking LiveKit's Twirp JSON
 * protocol for the calls the service makes (RoomService CreateRoom / DeleteRoom, AgentDispatchService
 * CreateDispatch). Each request must carry `Authorization: Bearer <JWT>` signed with the API secret,
 * issued by the API key, with the grants LiveKit requires for the method. Requests are recorded; a
 * switch makes a method fail (or hang) to exercise `call_start_failed`.
 */

export type TwirpMethod = "CreateRoom" | "DeleteRoom" | "CreateDispatch";

export interface RecordedLiveKitRequest {
  service: string;
  method: string;
  body: Record<string, unknown>;
  /** The verified claims of the bearer token, or null when it did not verify. */
  claims: ClaimGrants | null;
  /** The HTTP status the fake answered. */
  status: number;
}

export interface FakeRoom {
  sid: string;
  name: string;
  emptyTimeout: number;
  departureTimeout: number;
  maxParticipants: number;
  metadata: string;
}

export interface FakeDispatch {
  id: string;
  room: string;
  agentName: string;
  metadata: string;
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
  /** Makes `method` fail with an HTTP 500 Twirp error (`error`) or never answer (`hang`), until reset with null. */
  fail(method: TwirpMethod, how?: "error" | "hang" | null): void;
  /** A webhook as LiveKit sends it: JSON body and an Authorization JWT holding the body's sha256. */
  signWebhook(
    event: Record<string, unknown>,
    opts?: { secret?: string; apiKey?: string },
  ): Promise<{ body: string; headers: Record<string, string> }>;
  close(): Promise<void>;
}

/** Grants LiveKit's RoomService and AgentDispatchService require per method. */
function authorized(method: string, claims: ClaimGrants, body: Record<string, unknown>): boolean {
  const video = claims.video ?? {};
  switch (method) {
    case "CreateRoom":
    case "DeleteRoom":
      return video.roomCreate === true;
    case "CreateDispatch":
      return video.roomAdmin === true && typeof body.room === "string" && video.room === body.room;
    default:
      return false;
  }
}

function twirpError(status: number, code: string, msg: string): Response {
  // The SDK only parses the error body when the content type is exactly application/json.
  return new Response(JSON.stringify({ code, msg }), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function twirpJson(body: unknown): Response {
  return new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });
}

export async function startFakeLiveKit(
  opts: { apiKey?: string; apiSecret?: string } = {},
): Promise<FakeLiveKit> {
  const apiKey = opts.apiKey ?? "APIfake";
  const apiSecret = opts.apiSecret ?? "fake-livekit-secret-that-is-long-enough-0123456789";
  const verifier = new TokenVerifier(apiKey, apiSecret);
  const requests: RecordedLiveKitRequest[] = [];
  const rooms = new Map<string, FakeRoom>();
  const dispatches: FakeDispatch[] = [];
  const failures = new Map<string, "error" | "hang">();
  const hanging = new Set<() => void>();
  let seq = 0;

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const url = new URL(req.url);
      const match = /^\/twirp\/livekit\.(\w+)\/(\w+)$/.exec(url.pathname);
      if (req.method !== "POST" || !match) return twirpError(404, "bad_route", "no such route");
      const [, service, method] = match as unknown as [string, string, string];
      let body: Record<string, unknown> = {};
      try {
        body = (await req.json()) as Record<string, unknown>;
      } catch {
        return twirpError(400, "malformed", "body is not JSON");
      }
      const record: RecordedLiveKitRequest = { service, method, body, claims: null, status: 200 };
      requests.push(record);
      const answer = (res: Response) => {
        record.status = res.status;
        return res;
      };

      const auth = req.headers.get("authorization") ?? "";
      const jwt = /^Bearer (.+)$/.exec(auth)?.[1];
      try {
        record.claims = jwt ? await verifier.verify(jwt) : null;
      } catch {
        record.claims = null;
      }
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

      if (service === "RoomService" && method === "CreateRoom") {
        const name = String(body.name ?? "");
        if (!name) return answer(twirpError(400, "invalid_argument", "name is required"));
        const room: FakeRoom = {
          sid: `RM_${++seq}`,
          name,
          emptyTimeout: Number(body.emptyTimeout ?? 0),
          departureTimeout: Number(body.departureTimeout ?? 0),
          maxParticipants: Number(body.maxParticipants ?? 0),
          metadata: String(body.metadata ?? ""),
        };
        rooms.set(name, room);
        return answer(twirpJson({ ...room, creationTime: String(Math.floor(Date.now() / 1000)) }));
      }
      if (service === "RoomService" && method === "DeleteRoom") {
        const name = String(body.room ?? "");
        if (!rooms.delete(name)) return answer(twirpError(404, "not_found", "room not found"));
        return answer(twirpJson({}));
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
      return answer(twirpError(404, "bad_route", `no handler for ${service}/${method}`));
    },
  });

  const url = `http://127.0.0.1:${server.port}`;
  return {
    url,
    apiKey,
    apiSecret,
    env: { LIVEKIT_URL: url, LIVEKIT_API_KEY: apiKey, LIVEKIT_API_SECRET: apiSecret },
    requests,
    rooms,
    dispatches,
    fail(method, how = "error") {
      if (how) failures.set(method, how);
      else failures.delete(method);
    },
    async signWebhook(event, o = {}) {
      const body = JSON.stringify(event);
      const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)));
      const at = new AccessToken(o.apiKey ?? apiKey, o.secret ?? apiSecret, { ttl: "5m" });
      at.sha256 = btoa(String.fromCharCode(...digest));
      return {
        body,
        headers: { "content-type": "application/webhook+json", authorization: await at.toJwt() },
      };
    },
    async close() {
      for (const release of hanging) release();
      await server.stop(true);
    },
  };
}

/** Webhook events in LiveKit's JSON form (protobuf JSON: camelCase, int64 as strings). */
export const liveKitEvents = {
  participantJoined(roomName: string, identity: string, kind: "STANDARD" | "AGENT" = "STANDARD") {
    return {
      id: `EV_${crypto.randomUUID().slice(0, 12)}`,
      event: "participant_joined",
      createdAt: String(Math.floor(Date.now() / 1000)),
      room: { sid: "RM_1", name: roomName },
      participant: { sid: `PA_${identity}`, identity, kind, state: "ACTIVE" },
    };
  },
  roomFinished(roomName: string) {
    return {
      id: `EV_${crypto.randomUUID().slice(0, 12)}`,
      event: "room_finished",
      createdAt: String(Math.floor(Date.now() / 1000)),
      room: { sid: "RM_1", name: roomName },
    };
  },
};
