import { render } from "preact";
import { type CallRequest, type FetchLike, startWebCall, WidgetError } from "./api.ts";
import { TEXTS } from "./i18n.ts";
import { type Config, resolveConfig } from "./options.ts";
import { adoptStyles } from "./styles.ts";
import type {
  MediaCall,
  MediaClient,
  StateData,
  WidgetErrorCode,
  WidgetHandle,
  WidgetOptions,
  WidgetState,
} from "./types.ts";
import { Widget } from "./Widget.tsx";

/** A simulated (test-mode) call is shown in progress for about a minute, with no media. */
export const SIMULATED_CALL_SECONDS = 60;

/** What the widget needs from the browser; `browserRuntime` gives the real ones. */
export interface Runtime {
  fetch: FetchLike;
  /** Absent where the page is not a secure context or the browser has no microphone API. */
  getUserMedia: ((constraints: MediaStreamConstraints) => Promise<MediaStream>) | undefined;
  loadMedia(url: string): Promise<MediaClient>;
  /** The bot check's token, its script loaded for `user` (the widget) if need be. */
  captchaToken(doc: Document, scriptUrl: string, siteKey: string, user: object): Promise<string>;
  prefetchCaptcha(doc: Document, scriptUrl: string, siteKey: string, user: object): void;
  /** `user` is destroyed: the bot check's script goes when no other widget of the page uses it. */
  releaseCaptcha(doc: Document, user: object): void;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(id: unknown): void;
}

export interface Environment {
  doc: Document;
  /** Address of the widget script: gives the default API root and the media client address. */
  scriptUrl: string | undefined;
  runtime: Runtime;
}

const UNSPENT_REFUSALS: readonly WidgetErrorCode[] = [
  "rate_limited",
  "plan_required",
  "plan_minutes_exhausted",
  "agent_unavailable",
  "network_error",
];

/** Mounts one widget. Each call makes an independent widget with its own element, state and listeners. */
export function createWidget(options: WidgetOptions, env: Environment): WidgetHandle {
  const { doc, runtime } = env;
  const win = doc.defaultView as (Window & typeof globalThis) | null;
  const config: Config = resolveConfig(options, doc, env.scriptUrl);
  const texts = TEXTS[config.lang];
  const label = config.label ?? texts.label;

  const host = doc.createElement("service-widget");
  if (!config.target) host.setAttribute("data-floating", "");
  const root = host.attachShadow({ mode: "open" });
  adoptStyles(root);
  const view = doc.createElement("div");
  const audio = doc.createElement("div");
  audio.hidden = true;
  root.append(view, audio);

  let state: WidgetState = "idle";
  let error: WidgetErrorCode | null = null;
  let announcement = "";
  let data: StateData = Object.freeze({ state: "idle" });
  /** Bumped whenever an attempt is abandoned, so late answers of an old attempt are ignored. */
  let attempt = 0;
  let stream: MediaStream | null = null;
  let call: MediaCall | null = null;
  let endTimer: unknown = null;
  let abort: AbortController | null = null;
  let warmedUp = false;
  let destroyed = false;
  const startWaiters: ((d: StateData) => void)[] = [];

  const draw = () =>
    render(
      <Widget
        state={state}
        error={error}
        texts={texts}
        label={label}
        announcement={announcement}
        onClick={onClick}
        onWarmUp={warmUp}
      />,
      view,
    );

  function setState(next: WidgetState, code: WidgetErrorCode | null = null) {
    state = next;
    error = code;
    announcement =
      next === "connecting"
        ? texts.announceConnecting
        : next === "in-call"
          ? texts.announceInCall
          : next === "idle"
            ? label
            : "";
    data = Object.freeze(next === "error" ? { state: next, error: code ?? "unknown" } : { state: next });
    draw();
    const detail = data;
    try {
      config.onStateChange?.(detail);
    } catch (err) {
      win?.reportError?.(err);
    }
    host.dispatchEvent(
      new (win?.CustomEvent ?? CustomEvent)("service:statechange", { detail, bubbles: true, composed: true }),
    );
    if (next !== "connecting") for (const resolve of startWaiters.splice(0)) resolve(detail);
  }

  /** Lets go of everything a call holds: timer, request, room and the microphone. */
  function release(): Promise<void> {
    if (endTimer !== null) runtime.clearTimeout(endTimer);
    endTimer = null;
    abort?.abort();
    abort = null;
    const leaving = call?.leave().catch(() => {}) ?? Promise.resolve();
    call = null;
    for (const track of stream?.getTracks() ?? []) track.stop();
    stream = null;
    return leaving;
  }

  /** End of a call or of an attempt: back to idle. */
  function finish(): Promise<void> {
    attempt++;
    const leaving = release();
    if (state !== "idle") setState("idle");
    return leaving;
  }

  async function acquireMicrophone(): Promise<MediaStream> {
    if (!runtime.getUserMedia) throw new WidgetError("microphone_unavailable");
    let media: MediaStream;
    try {
      media = await runtime.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
      });
    } catch (err) {
      const name = (err as { name?: string } | null)?.name;
      throw new WidgetError(
        name === "NotAllowedError" || name === "SecurityError" || name === "PermissionDeniedError"
          ? "microphone_blocked"
          : "microphone_unavailable",
      );
    }
    if (media.getAudioTracks().length === 0) {
      for (const track of media.getTracks()) track.stop();
      throw new WidgetError("microphone_unavailable");
    }
    return media;
  }

  async function credentialBody(): Promise<CallRequest> {
    const credential = config.credential;
    if (credential.kind === "publishable") {
      const captchaToken = await runtime.captchaToken(doc, config.captchaScriptUrl, credential.siteKey, host);
      return { publishableKey: credential.key, captchaToken };
    }
    if (credential.kind === "single-token") {
      const sessionToken = credential.token;
      if (!sessionToken) throw new WidgetError("invalid_session_token");
      credential.token = null;
      return { sessionToken };
    }
    let sessionToken: unknown;
    try {
      sessionToken = await credential.get();
    } catch {
      throw new WidgetError("unknown");
    }
    if (typeof sessionToken !== "string" || !sessionToken) throw new WidgetError("invalid_session_token");
    return { sessionToken };
  }

  async function run(id: number) {
    setState("connecting");
    let sentToken: string | null = null;
    try {
      // A token already used needs no microphone and no request.
      const credential = config.credential;
      if (credential.kind === "single-token" && !credential.token)
        throw new WidgetError("invalid_session_token");
      // The media client loads from the click on, while the microphone is asked for and the call
      // requested; a simulated call leaves it unused.
      const mediaLoad = runtime.loadMedia(config.mediaUrl);
      mediaLoad.catch(() => {});
      // The microphone first: a refusal costs no token, no bot check and no minute.
      const media = await acquireMicrophone();
      if (id !== attempt) {
        for (const track of media.getTracks()) track.stop();
        return;
      }
      stream = media;
      const body = await credentialBody();
      if (credential.kind === "single-token" && "sessionToken" in body) sentToken = body.sessionToken;
      if (id !== attempt) return;
      abort = new AbortController();
      const answer = await startWebCall(runtime.fetch, config.apiBase, body, abort.signal);
      if (id !== attempt) return;
      abort = null;
      if (answer.kind === "simulated") {
        endTimer = runtime.setTimeout(
          () => void finish(),
          Math.min(SIMULATED_CALL_SECONDS, answer.maxSeconds) * 1000,
        );
        setState("in-call");
        return;
      }
      let client: MediaClient;
      try {
        // A load that failed is tried once more now that the call is there.
        client = await mediaLoad.catch(() => runtime.loadMedia(config.mediaUrl));
      } catch {
        throw new WidgetError("network_error");
      }
      if (id !== attempt) return;
      const microphone = stream.getAudioTracks()[0]!;
      let joined: MediaCall;
      try {
        joined = await client.joinCall({
          serverUrl: answer.serverUrl,
          participantToken: answer.participantToken,
          microphone,
          audioContainer: audio,
          onEnded: () => {
            if (id === attempt) void finish();
          },
        });
      } catch {
        throw new WidgetError("media_error");
      }
      if (id !== attempt) {
        void joined.leave().catch(() => {});
        return;
      }
      call = joined;
      endTimer = runtime.setTimeout(() => void finish(), answer.maxSeconds * 1000);
      setState("in-call");
    } catch (err) {
      if (id !== attempt) return;
      const code = err instanceof WidgetError ? err.code : "unknown";
      // A token the server refused without spending it stays usable for the next click.
      if (sentToken && config.credential.kind === "single-token" && UNSPENT_REFUSALS.includes(code)) {
        config.credential.token = sentToken;
      }
      void release();
      setState("error", code);
    }
  }

  function start(): Promise<StateData> {
    if (destroyed || state === "in-call") return Promise.resolve(data);
    const settled = new Promise<StateData>((resolve) => startWaiters.push(resolve));
    if (state !== "connecting") void run(++attempt);
    return settled;
  }

  async function stop(): Promise<StateData> {
    if (!destroyed && state !== "idle") await finish();
    return data;
  }

  function onClick() {
    if (state === "connecting") return;
    if (state === "in-call") void stop();
    else void start();
  }

  /**
   * First pointer-enter or focus: the bot check's script, slow to fetch and to start, loads ahead of
   * the click that needs its token. The media client waits for the click itself (`run`).
   */
  function warmUp() {
    if (warmedUp) return;
    warmedUp = true;
    if (config.credential.kind === "publishable") {
      runtime.prefetchCaptcha(doc, config.captchaScriptUrl, config.credential.siteKey, host);
    }
  }

  /**
   * Escape ends a call wherever the focus is on the page: heard on the window in the capture phase,
   * before any element of the page can stop the event (a modal or a combobox often does).
   */
  function onKeyDown(event: KeyboardEvent) {
    // An Escape that cancels an input method's composition is the page's, not a hang-up.
    if (event.key === "Escape" && !event.isComposing && (state === "in-call" || state === "connecting"))
      void stop();
  }
  const keyTarget: EventTarget = win ?? doc;
  keyTarget.addEventListener("keydown", onKeyDown as EventListener, true);

  draw();
  (config.target ?? doc.body).appendChild(host);

  return {
    start,
    stop,
    getState: () => state,
    destroy() {
      if (destroyed) return;
      attempt++;
      void release();
      destroyed = true;
      state = "idle";
      data = Object.freeze({ state: "idle" });
      for (const resolve of startWaiters.splice(0)) resolve(data);
      keyTarget.removeEventListener("keydown", onKeyDown as EventListener, true);
      runtime.releaseCaptcha(doc, host);
      render(null, view);
      root.adoptedStyleSheets = [];
      root.replaceChildren();
      host.remove();
    },
  };
}
