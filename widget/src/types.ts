/** The four states of the widget. */
export type WidgetState = "idle" | "connecting" | "in-call" | "error";

/** Codes of the API that the widget passes on unchanged. */
export const API_ERROR_CODES = [
  "origin_not_allowed",
  "invalid_key",
  "invalid_captcha",
  "rate_limited",
  "minute_cap_reached",
  "agent_unavailable",
  "plan_required",
  "plan_minutes_exhausted",
  "invalid_session_token",
  "call_start_failed",
] as const;

export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/** Every code the widget can report: the API's, else one of its own. */
export type WidgetErrorCode =
  | ApiErrorCode
  | "microphone_blocked"
  | "microphone_unavailable"
  | "network_error"
  | "media_error"
  | "unknown";

/** The data given to `onStateChange` and carried by `service:statechange`. */
export type StateData =
  | { readonly state: "idle" | "connecting" | "in-call" }
  | { readonly state: "error"; readonly error: WidgetErrorCode };

export type Lang = "fr" | "en";

/** The options of `ServiceWidget.init(options)`, mirroring the script attributes. */
export interface WidgetOptions {
  /** Publishable key (`inf_pub_…`); needs `captchaSiteKey`. */
  key?: string;
  /** Public site key of the bot check. */
  captchaSiteKey?: string;
  /** Single-use session token (`inf_wcs_…`): serves one call. */
  sessionToken?: string;
  /** Called before each call; returns a fresh session token. */
  getSessionToken?: () => string | Promise<string>;
  /** CSS selector (or element) receiving the button; without it the button floats bottom right. */
  target?: string | Element;
  lang?: string;
  label?: string;
  /** API root; default: the origin serving the script followed by `/api/v1`. */
  apiBase?: string;
  onStateChange?: (data: StateData) => void;
  /** Where the bot check script is loaded from (a local stand-in in tests). */
  captchaScriptUrl?: string;
  /** Where the media client is loaded from; default: `v1/media.js` next to the script. */
  mediaUrl?: string;
}

/** What `ServiceWidget.init` returns. */
export interface WidgetHandle {
  /** Starts a call; settles when the state leaves `connecting`. */
  start(): Promise<StateData>;
  /** Ends a call (or cancels one being set up); settles at `idle`. */
  stop(): Promise<StateData>;
  getState(): WidgetState;
  /** Ends any call and removes everything the widget added. */
  destroy(): void;
}

/** A joined call, as the media client returns it. */
export interface MediaCall {
  leave(): Promise<void>;
}

/** The media client module (`/widget/v1/media.js`). */
export interface MediaClient {
  joinCall(opts: {
    serverUrl: string;
    participantToken: string;
    microphone: MediaStreamTrack;
    /** Where the agent's audio elements are placed. */
    audioContainer: Element;
    /**
     * Called once when the agent leaves or the room closes, after the join resolved: a room lost
     * while joining makes the join reject instead (a call that could not start).
     */
    onEnded: () => void;
  }): Promise<MediaCall>;
}
