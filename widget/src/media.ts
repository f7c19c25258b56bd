/**
 * The real-time media client, served as `/widget/v1/media.js` (an ES module bundling livekit-client).
 * `v1.js` imports it on the first interaction only, so the button itself stays small.
 */
import { type Participant, type RemoteTrack, Room, RoomEvent, Track } from "livekit-client";
import type { MediaCall, MediaClient } from "./types.ts";

export const joinCall: MediaClient["joinCall"] = async (opts) => {
  const room = new Room({ adaptiveStream: false, dynacast: false, disconnectOnPageLeave: true });
  let ended = false;
  // livekit-client reports a connection that fails as a disconnection too: until the call is joined,
  // a lost room is a call that could not start (the join rejects: media_error), not one that ended.
  let joined = false;
  let lostWhileJoining = false;
  const end = () => {
    if (!joined) lostWhileJoining = true;
    else if (!ended) {
      ended = true;
      opts.onEnded();
    }
  };
  const elements = new Set<HTMLMediaElement>();
  room
    .on(RoomEvent.TrackSubscribed, (track: RemoteTrack) => {
      if (track.kind !== Track.Kind.Audio) return;
      const element = track.attach();
      elements.add(element);
      opts.audioContainer.appendChild(element);
    })
    .on(RoomEvent.TrackUnsubscribed, (track: RemoteTrack) => {
      for (const element of track.detach()) {
        elements.delete(element);
        element.remove();
      }
    })
    // The call is over when the agent leaves or the room closes (server end, maxSeconds, network loss).
    .on(RoomEvent.ParticipantDisconnected, (participant: Participant) => {
      if (participant.isAgent) end();
    })
    .on(RoomEvent.Disconnected, end);

  const leave = async () => {
    ended = true;
    for (const element of elements) element.remove();
    elements.clear();
    await room.disconnect(true);
  };

  try {
    await room.connect(opts.serverUrl, opts.participantToken, { autoSubscribe: true });
    await room.localParticipant.publishTrack(opts.microphone, { source: Track.Source.Microphone });
    // The click that started the call allows playback; this unlocks it where a browser still hesitates.
    await room.startAudio().catch(() => {});
    if (lostWhileJoining) throw new Error("the room was lost while joining");
    joined = true;
  } catch (err) {
    await leave().catch(() => {});
    throw err;
  }
  return { leave } satisfies MediaCall;
};
