/**
 * A page per test: a happy-dom Window (no global DOM for the suite) and a runtime whose browser
 * parts (network, microphone, media client, bot check, timers) are recorded and scripted.
 */
import { Window } from "happy-dom";
import { createWidget, type Runtime } from "../../widget/src/controller.tsx";
import type {
  MediaCall,
  MediaClient,
  StateData,
  WidgetHandle,
  WidgetOptions,
} from "../../widget/src/types.ts";

export const SCRIPT_URL = "https://voice.example.net/widget/v1.js";

export interface Page {
  window: Window;
  document: Document;
  close(): Promise<void>;
}

export function openPage(opts: { lang?: string; body?: string; url?: string } = {}): Page {
  const window = new Window({ url: opts.url ?? "https://shop.example.com/contact" });
  const document = window.document as unknown as Document;
  if (opts.lang !== undefined) document.documentElement.setAttribute("lang", opts.lang);
  document.body.innerHTML = opts.body ?? "";
  return { window, document, close: () => window.happyDOM.close() };
}

export class FakeTrack {
  stopped = false;
  constructor(readonly kind: "audio" | "video" = "audio") {}
  stop() {
    this.stopped = true;
  }
}

/** A MediaStream as far as the widget uses it. */
export function fakeStream(tracks: FakeTrack[] = [new FakeTrack()]): MediaStream {
  return {
    getTracks: () => tracks,
    getAudioTracks: () => tracks.filter((t) => t.kind === "audio"),
  } as unknown as MediaStream;
}

export interface RecordedRequest {
  url: string;
  init: RequestInit;
  body: Record<string, unknown>;
}

interface Timer {
  id: number;
  at: number;
  fn: () => void;
}

/** The browser as the widget sees it, every part observable. */
export class FakeBrowser implements Runtime {
  readonly requests: RecordedRequest[] = [];
  readonly streams: { tracks: FakeTrack[] }[] = [];
  readonly joins: Parameters<MediaClient["joinCall"]>[0][] = [];
  readonly leaves: number[] = [];
  readonly mediaLoads: string[] = [];
  readonly captchaLoads: { scriptUrl: string; siteKey: string }[] = [];
  readonly captchaExecutions: { scriptUrl: string; siteKey: string }[] = [];
  /** Answers POST /web-calls; default: a simulated call. */
  answer: (req: RecordedRequest) => Response | Promise<Response> = () => json(201, simulatedAnswer());
  /** Set to make getUserMedia fail with this DOMException name. */
  microphoneError: string | null = null;
  /** Set to `null` to remove the microphone API altogether. */
  getUserMedia: Runtime["getUserMedia"] = async () => {
    if (this.microphoneError) throw Object.assign(new Error("denied"), { name: this.microphoneError });
    const tracks = [new FakeTrack()];
    this.streams.push({ tracks });
    return fakeStream(tracks);
  };
  mediaFailure: "load" | "join" | null = null;
  captchaFailure = false;
  now = 0;
  #timers: Timer[] = [];
  #nextTimer = 1;

  fetch = async (url: string, init: RequestInit): Promise<Response> => {
    const req = { url, init, body: JSON.parse(String(init.body)) };
    this.requests.push(req);
    return this.answer(req);
  };

  loadMedia = async (url: string): Promise<MediaClient> => {
    this.mediaLoads.push(url);
    if (this.mediaFailure === "load") throw new TypeError("Failed to fetch dynamically imported module");
    return {
      joinCall: async (opts) => {
        this.joins.push(opts);
        if (this.mediaFailure === "join") throw new Error("could not establish signal connection");
        const index = this.joins.length - 1;
        return {
          leave: async () => {
            this.leaves.push(index);
          },
        } satisfies MediaCall;
      },
    };
  };

  captchaToken = async (_doc: Document, scriptUrl: string, siteKey: string) => {
    this.captchaExecutions.push({ scriptUrl, siteKey });
    if (this.captchaFailure) throw Object.assign(new Error("captcha"), { code: "invalid_captcha" });
    return `captcha-token-for-${siteKey}`;
  };

  prefetchCaptcha = (_doc: Document, scriptUrl: string, siteKey: string) => {
    this.captchaLoads.push({ scriptUrl, siteKey });
  };

  readonly captchaReleases: object[] = [];
  releaseCaptcha = (_doc: Document, user: object) => {
    this.captchaReleases.push(user);
  };

  setTimeout = (fn: () => void, ms: number) => {
    const id = this.#nextTimer++;
    this.#timers.push({ id, at: this.now + ms, fn });
    return id;
  };

  clearTimeout = (id: unknown) => {
    this.#timers = this.#timers.filter((t) => t.id !== id);
  };

  /** Moves the fake clock, running the timers that fall due. */
  advance(ms: number) {
    const until = this.now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.now = due.at;
      due.fn();
    }
    this.now = until;
  }

  get pendingTimers() {
    return this.#timers.length;
  }
}

export function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

export function simulatedAnswer(maxSeconds = 600) {
  return { simulated: true, livemode: false, callId: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", maxSeconds };
}

export function liveAnswer(maxSeconds = 600) {
  return {
    callId: "call_01JD8Y3M6W9Q2T4V5X7Z8A9B0D",
    livemode: true,
    maxSeconds,
    room: {
      name: "web-call_01",
      serverUrl: "wss://media.example.net",
      participantToken: "eyJ.participant.token",
    },
  };
}

export function apiError(status: number, code: string) {
  return json(status, {
    error: { code, message: `refused: ${code}`, requestId: "req_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" },
  });
}

export interface Mounted {
  page: Page;
  browser: FakeBrowser;
  widget: WidgetHandle;
  /** Everything passed to onStateChange, in order. */
  changes: StateData[];
  /** Every service:statechange event seen on the document. */
  events: CustomEvent<StateData>[];
  host(): HTMLElement;
  shadow(): ShadowRoot;
  button(): HTMLButtonElement;
  status(): HTMLElement;
  alert(): HTMLElement;
}

/** Mounts a widget on a fresh page with a fake browser. */
export function mount(
  options: WidgetOptions,
  opts: { page?: Page; browser?: FakeBrowser; scriptUrl?: string } = {},
): Mounted {
  const page = opts.page ?? openPage();
  const browser = opts.browser ?? new FakeBrowser();
  const changes: StateData[] = [];
  const events: CustomEvent<StateData>[] = [];
  page.document.addEventListener("service:statechange", (e) => events.push(e as CustomEvent<StateData>));
  const userCallback = options.onStateChange;
  const before = new Set(page.document.querySelectorAll("service-widget"));
  const widget = createWidget(
    {
      ...options,
      onStateChange: (d) => {
        changes.push(d);
        userCallback?.(d);
      },
    },
    { doc: page.document, scriptUrl: opts.scriptUrl ?? SCRIPT_URL, runtime: browser },
  );
  const element = [...page.document.querySelectorAll("service-widget")].find((e) => !before.has(e));
  const host = () => element as HTMLElement;
  const shadow = () => host().shadowRoot!;
  return {
    page,
    browser,
    widget,
    changes,
    events,
    host,
    shadow,
    button: () => shadow().querySelector("button")!,
    status: () => shadow().querySelector('[role="status"]')!,
    alert: () => shadow().querySelector('[role="alert"]')!,
  };
}

export const PUBLISHABLE = { key: "inf_pub_4fJ9kQ2mX7pL0sV8aB3nC6dE", captchaSiteKey: "6Lc-site-key" };

/** Lets pending promise callbacks run. */
export async function flush(times = 10) {
  for (let i = 0; i < times; i++) await Promise.resolve();
  await new Promise((r) => setTimeout(r, 0));
}
