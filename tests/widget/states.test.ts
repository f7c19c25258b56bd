import { afterEach, describe, expect, test } from "bun:test";
import { SIMULATED_CALL_SECONDS } from "../../widget/src/controller.tsx";
import {
  apiError,
  FakeBrowser,
  flush,
  json,
  liveAnswer,
  type Mounted,
  mount,
  openPage,
  PUBLISHABLE,
  simulatedAnswer,
} from "./harness.ts";

const open: Mounted[] = [];
function track(m: Mounted) {
  open.push(m);
  return m;
}
afterEach(async () => {
  for (const m of open.splice(0)) {
    m.widget.destroy();
    await m.page.close();
  }
});

const TOKEN = "inf_wcs_9hG2kL5pQ8rT1vX4zB7nM0cF";

describe("microphone first", () => {
  test("a refused microphone is error microphone_blocked, with no request, no token and no bot check", async () => {
    const browser = new FakeBrowser();
    browser.microphoneError = "NotAllowedError";
    const getToken = { calls: 0 };
    const m = track(
      mount(
        {
          getSessionToken: () => {
            getToken.calls++;
            return TOKEN;
          },
        },
        { browser },
      ),
    );
    const settled = await m.widget.start();
    expect(settled).toEqual({ state: "error", error: "microphone_blocked" });
    expect(m.changes).toEqual([{ state: "connecting" }, { state: "error", error: "microphone_blocked" }]);
    expect(browser.requests).toHaveLength(0);
    expect(getToken.calls).toBe(0);
    expect(browser.captchaExecutions).toHaveLength(0);
  });

  test("a refused microphone does not spend a single-use token: the next click uses it", async () => {
    const browser = new FakeBrowser();
    browser.microphoneError = "NotAllowedError";
    const m = track(mount({ sessionToken: TOKEN }, { browser }));
    await m.widget.start();
    browser.microphoneError = null;
    expect(await m.widget.start()).toEqual({ state: "in-call" });
    expect(browser.requests.map((r) => r.body)).toEqual([{ sessionToken: TOKEN }]);
  });

  test("no microphone, a busy one or no microphone API at all is microphone_unavailable", async () => {
    for (const name of ["NotFoundError", "NotReadableError", "OverconstrainedError"]) {
      const browser = new FakeBrowser();
      browser.microphoneError = name;
      const m = track(mount({ sessionToken: TOKEN }, { browser }));
      expect(await m.widget.start()).toEqual({ state: "error", error: "microphone_unavailable" });
      expect(browser.requests).toHaveLength(0);
    }
    const browser = new FakeBrowser();
    browser.getUserMedia = undefined;
    const m = track(mount({ sessionToken: TOKEN }, { browser }));
    expect(await m.widget.start()).toEqual({ state: "error", error: "microphone_unavailable" });
  });

  test("a SecurityError (microphone forbidden by policy) is microphone_blocked", async () => {
    const browser = new FakeBrowser();
    browser.microphoneError = "SecurityError";
    const m = track(mount({ sessionToken: TOKEN }, { browser }));
    expect(await m.widget.start()).toEqual({ state: "error", error: "microphone_blocked" });
  });
});

describe("credentials", () => {
  test("publishable key: the bot check token for web_call, then the key and token in the body only", async () => {
    const m = track(mount({ ...PUBLISHABLE, apiBase: "https://api.example.net/api/v1/" }));
    await m.widget.start();
    expect(m.browser.captchaExecutions).toEqual([
      { scriptUrl: "https://www.google.com/recaptcha/api.js", siteKey: PUBLISHABLE.captchaSiteKey },
    ]);
    const [req] = m.browser.requests;
    expect(req!.url).toBe("https://api.example.net/api/v1/web-calls");
    expect(req!.init.method).toBe("POST");
    expect(req!.init.credentials).toBe("omit");
    expect(new Headers(req!.init.headers).get("content-type")).toBe("application/json");
    expect(req!.body).toEqual({
      publishableKey: PUBLISHABLE.key,
      captchaToken: "captcha-token-for-6Lc-site-key",
    });
    expect(req!.url).not.toContain(PUBLISHABLE.key);
  });

  test("the bot check script address can be replaced (a local stand-in)", async () => {
    const m = track(mount({ ...PUBLISHABLE, captchaScriptUrl: "http://127.0.0.1:9/recaptcha/api.js" }));
    await m.widget.start();
    expect(m.browser.captchaExecutions[0]!.scriptUrl).toBe("http://127.0.0.1:9/recaptcha/api.js");
  });

  test("a failed bot check is error invalid_captcha with no request", async () => {
    const browser = new FakeBrowser();
    const m = track(mount(PUBLISHABLE, { browser }));
    browser.captchaToken = async () => {
      const { WidgetError } = await import("../../widget/src/api.ts");
      throw new WidgetError("invalid_captcha");
    };
    expect(await m.widget.start()).toEqual({ state: "error", error: "invalid_captcha" });
    expect(browser.requests).toHaveLength(0);
    expect(browser.streams[0]!.tracks[0]!.stopped).toBe(true);
  });

  test("getSessionToken is awaited before each call, and a session call runs no bot check", async () => {
    let n = 0;
    const m = track(
      mount({
        getSessionToken: async () => {
          n++;
          await flush(1);
          return `${TOKEN}${n}`;
        },
      }),
    );
    await m.widget.start();
    await m.widget.stop();
    await m.widget.start();
    expect(m.browser.requests.map((r) => r.body)).toEqual([
      { sessionToken: `${TOKEN}1` },
      { sessionToken: `${TOKEN}2` },
    ]);
    expect(m.browser.captchaExecutions).toHaveLength(0);
  });

  test("getSessionToken returning nothing is invalid_session_token; throwing is unknown; no request", async () => {
    const empty = track(mount({ getSessionToken: () => "" }));
    expect(await empty.widget.start()).toEqual({ state: "error", error: "invalid_session_token" });
    const failing = track(
      mount({
        getSessionToken: () => {
          throw new Error("backend down");
        },
      }),
    );
    expect(await failing.widget.start()).toEqual({ state: "error", error: "unknown" });
    expect(empty.browser.requests.length + failing.browser.requests.length).toBe(0);
  });

  test("a single-use token serves one call: the next click is invalid_session_token without any request", async () => {
    const m = track(mount({ sessionToken: TOKEN }));
    expect(await m.widget.start()).toEqual({ state: "in-call" });
    await m.widget.stop();
    const micBefore = m.browser.streams.length;
    expect(await m.widget.start()).toEqual({ state: "error", error: "invalid_session_token" });
    expect(m.browser.requests).toHaveLength(1);
    expect(m.browser.streams.length).toBe(micBefore);
  });

  test("a refusal that does not spend the token (agent unavailable, rate limit, plan) keeps it for a retry", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => apiError(503, "agent_unavailable");
    const m = track(mount({ sessionToken: TOKEN }, { browser }));
    expect(await m.widget.start()).toEqual({ state: "error", error: "agent_unavailable" });
    browser.answer = () => json(201, simulatedAnswer());
    expect(await m.widget.start()).toEqual({ state: "in-call" });
    expect(browser.requests.map((r) => r.body.sessionToken)).toEqual([TOKEN, TOKEN]);
  });

  test("a refusal that spends the token (call_start_failed) leaves none for a retry", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => apiError(502, "call_start_failed");
    const m = track(mount({ sessionToken: TOKEN }, { browser }));
    expect(await m.widget.start()).toEqual({ state: "error", error: "call_start_failed" });
    expect(await m.widget.start()).toEqual({ state: "error", error: "invalid_session_token" });
    expect(browser.requests).toHaveLength(1);
  });
});

describe("server answers", () => {
  const codes: [number, string][] = [
    [403, "origin_not_allowed"],
    [401, "invalid_key"],
    [400, "invalid_captcha"],
    [429, "rate_limited"],
    [429, "minute_cap_reached"],
    [503, "agent_unavailable"],
    [403, "plan_required"],
    [403, "plan_minutes_exhausted"],
    [401, "invalid_session_token"],
    [502, "call_start_failed"],
  ];
  for (const [status, code] of codes) {
    test(`${status} ${code} is the error ${code}, and the microphone is released`, async () => {
      const browser = new FakeBrowser();
      browser.answer = () => apiError(status, code);
      const m = track(mount(PUBLISHABLE, { browser }));
      expect(await m.widget.start()).toEqual({ state: "error", error: code as never });
      expect(m.widget.getState()).toBe("error");
      expect(browser.streams[0]!.tracks.every((t) => t.stopped)).toBe(true);
    });
  }

  test("codes the widget does not know, 500s and unreadable bodies are unknown", async () => {
    const answers = [
      () => apiError(500, "internal_error"),
      () => apiError(400, "invalid_request"),
      () => new Response("<html>bad gateway</html>", { status: 502 }),
      () => json(201, { callId: "call_x" }),
    ];
    for (const answer of answers) {
      const browser = new FakeBrowser();
      browser.answer = answer;
      const m = track(mount(PUBLISHABLE, { browser }));
      expect(await m.widget.start()).toEqual({ state: "error", error: "unknown" });
    }
  });

  test("a network failure is network_error", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => {
      throw new TypeError("Failed to fetch");
    };
    const m = track(mount(PUBLISHABLE, { browser }));
    expect(await m.widget.start()).toEqual({ state: "error", error: "network_error" });
  });

  test("the error state offers a retry that starts a new call", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => apiError(429, "rate_limited");
    const m = track(mount(PUBLISHABLE, { browser }));
    await m.widget.start();
    browser.answer = () => json(201, simulatedAnswer());
    m.button().click();
    await flush();
    expect(m.widget.getState()).toBe("in-call");
  });
});

describe("simulated call", () => {
  test("shows the call in progress for about a minute with no media, then idle with the microphone released", async () => {
    const m = track(mount({ sessionToken: TOKEN }));
    expect(await m.widget.start()).toEqual({ state: "in-call" });
    // The media client loaded with the click (the answer's kind was not known yet) and joined nothing.
    expect(m.browser.joins).toHaveLength(0);
    m.browser.advance(SIMULATED_CALL_SECONDS * 1000 - 1);
    expect(m.widget.getState()).toBe("in-call");
    expect(m.browser.streams[0]!.tracks[0]!.stopped).toBe(false);
    m.browser.advance(1);
    expect(m.widget.getState()).toBe("idle");
    expect(m.browser.streams[0]!.tracks[0]!.stopped).toBe(true);
    expect(m.changes.map((c) => c.state)).toEqual(["connecting", "in-call", "idle"]);
    expect(SIMULATED_CALL_SECONDS).toBeGreaterThanOrEqual(45);
    expect(SIMULATED_CALL_SECONDS).toBeLessThanOrEqual(90);
  });

  test("a shorter maxSeconds ends the simulated call sooner", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => json(201, simulatedAnswer(20));
    const m = track(mount({ sessionToken: TOKEN }, { browser }));
    await m.widget.start();
    browser.advance(20_000);
    expect(m.widget.getState()).toBe("idle");
  });
});

describe("live call", () => {
  test("loads the media client next to the script, joins the room with the microphone track, plays into the widget", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => json(201, liveAnswer());
    const m = track(mount(PUBLISHABLE, { browser }));
    expect(await m.widget.start()).toEqual({ state: "in-call" });
    expect(browser.mediaLoads).toEqual(["https://voice.example.net/widget/v1/media.js"]);
    const join = browser.joins[0]!;
    expect(join.serverUrl).toBe("wss://media.example.net");
    expect(join.participantToken).toBe("eyJ.participant.token");
    expect(join.microphone).toBe(browser.streams[0]!.tracks[0] as unknown as MediaStreamTrack);
    expect(m.shadow().contains(join.audioContainer)).toBe(true);
  });

  test("the agent leaving (or the room closing) ends the call: idle, room left, microphone released", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => json(201, liveAnswer());
    const m = track(mount(PUBLISHABLE, { browser }));
    await m.widget.start();
    browser.joins[0]!.onEnded();
    await flush();
    expect(m.widget.getState()).toBe("idle");
    expect(browser.leaves).toEqual([0]);
    expect(browser.streams[0]!.tracks[0]!.stopped).toBe(true);
    expect(browser.pendingTimers).toBe(0);
  });

  test("maxSeconds ends the call", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => json(201, liveAnswer(120));
    const m = track(mount(PUBLISHABLE, { browser }));
    await m.widget.start();
    browser.advance(119_999);
    expect(m.widget.getState()).toBe("in-call");
    browser.advance(1);
    expect(m.widget.getState()).toBe("idle");
    expect(browser.leaves).toEqual([0]);
    expect(browser.streams[0]!.tracks[0]!.stopped).toBe(true);
  });

  test("a media client that cannot load is network_error; a room that cannot be joined is media_error", async () => {
    for (const [failure, code] of [
      ["load", "network_error"],
      ["join", "media_error"],
    ] as const) {
      const browser = new FakeBrowser();
      browser.answer = () => json(201, liveAnswer());
      browser.mediaFailure = failure;
      const m = track(mount(PUBLISHABLE, { browser }));
      expect(await m.widget.start()).toEqual({ state: "error", error: code });
      expect(browser.streams[0]!.tracks[0]!.stopped).toBe(true);
    }
  });

  test("the media client loads from the click on; a load that failed then is tried again with the answer", async () => {
    const browser = new FakeBrowser();
    browser.mediaFailure = "load";
    browser.answer = () => {
      // The click's load has failed by now.
      expect(browser.mediaLoads).toHaveLength(1);
      browser.mediaFailure = null;
      return json(201, liveAnswer());
    };
    const m = track(mount(PUBLISHABLE, { browser }));
    expect(await m.widget.start()).toEqual({ state: "in-call" });
    expect(browser.mediaLoads).toEqual([
      "https://voice.example.net/widget/v1/media.js",
      "https://voice.example.net/widget/v1/media.js",
    ]);
    expect(browser.joins).toHaveLength(1);
  });

  test("stop() leaves the room, releases the microphone and settles at idle", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => json(201, liveAnswer());
    const m = track(mount(PUBLISHABLE, { browser }));
    await m.widget.start();
    expect(await m.widget.stop()).toEqual({ state: "idle" });
    expect(browser.leaves).toEqual([0]);
    expect(browser.streams[0]!.tracks[0]!.stopped).toBe(true);
  });
});

describe("start, stop and the state promise", () => {
  test("start() settles when the state leaves connecting; a second start() while connecting shares it", async () => {
    const browser = new FakeBrowser();
    let release!: () => void;
    browser.answer = () =>
      new Promise((resolve) => {
        release = () => resolve(json(201, simulatedAnswer()));
      });
    const m = track(mount({ sessionToken: TOKEN }, { browser }));
    const first = m.widget.start();
    const second = m.widget.start();
    await flush();
    expect(m.widget.getState()).toBe("connecting");
    release();
    expect(await first).toEqual({ state: "in-call" });
    expect(await second).toEqual({ state: "in-call" });
    expect(browser.requests).toHaveLength(1);
    expect(await m.widget.start()).toEqual({ state: "in-call" });
  });

  test("stop() while connecting cancels: idle at once, the late answer is ignored, the microphone released", async () => {
    const browser = new FakeBrowser();
    let release!: () => void;
    browser.answer = (req) =>
      new Promise((resolve, reject) => {
        req.init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
        release = () => resolve(json(201, liveAnswer()));
      });
    const m = track(mount(PUBLISHABLE, { browser }));
    const starting = m.widget.start();
    await flush();
    expect(await m.widget.stop()).toEqual({ state: "idle" });
    expect(await starting).toEqual({ state: "idle" });
    release();
    await flush();
    expect(m.widget.getState()).toBe("idle");
    expect(browser.joins).toHaveLength(0);
    expect(browser.streams[0]!.tracks[0]!.stopped).toBe(true);
    expect(m.changes.map((c) => c.state)).toEqual(["connecting", "idle"]);
  });

  test("stop() from error returns to idle; stop() at idle does nothing", async () => {
    const browser = new FakeBrowser();
    browser.microphoneError = "NotAllowedError";
    const m = track(mount(PUBLISHABLE, { browser }));
    expect(await m.widget.stop()).toEqual({ state: "idle" });
    expect(m.changes).toHaveLength(0);
    await m.widget.start();
    expect(await m.widget.stop()).toEqual({ state: "idle" });
    expect(m.widget.getState()).toBe("idle");
  });
});

describe("events", () => {
  test("onStateChange and service:statechange carry the same object; the event bubbles and is composed", async () => {
    const browser = new FakeBrowser();
    browser.answer = () => apiError(403, "origin_not_allowed");
    const m = track(mount(PUBLISHABLE, { browser }));
    await m.widget.start();
    expect(m.events.map((e) => e.detail)).toEqual([
      { state: "connecting" },
      { state: "error", error: "origin_not_allowed" },
    ]);
    m.events.forEach((event, i) => {
      expect(event.detail).toBe(m.changes[i]!);
      expect(event.bubbles).toBe(true);
      expect(event.composed).toBe(true);
      expect(event.target).toBe(m.host());
    });
  });

  test("a throwing onStateChange does not break the widget", async () => {
    const m = track(
      mount({
        sessionToken: TOKEN,
        onStateChange: () => {
          throw new Error("integrator bug");
        },
      }),
    );
    expect(await m.widget.start()).toEqual({ state: "in-call" });
    expect(m.events).toHaveLength(2);
  });
});

describe("several widgets on one page", () => {
  test("each has its own element, state, credential and events", async () => {
    const page = openPage({ body: '<main><div id="slot"></div></main>' });
    const a = track(mount({ sessionToken: `${TOKEN}a` }, { page }));
    const bBrowser = new FakeBrowser();
    bBrowser.answer = () => apiError(503, "agent_unavailable");
    const b = track(mount({ ...PUBLISHABLE, target: "#slot" }, { page: a.page, browser: bBrowser }));
    expect(b.host().parentElement?.id).toBe("slot");
    expect(a.page.document.querySelectorAll("service-widget")).toHaveLength(2);
    expect(await a.widget.start()).toEqual({ state: "in-call" });
    expect(b.widget.getState()).toBe("idle");
    expect(await b.widget.start()).toEqual({ state: "error", error: "agent_unavailable" });
    expect(a.widget.getState()).toBe("in-call");
    expect(a.changes.map((c) => c.state)).toEqual(["connecting", "in-call"]);
    expect(b.changes.map((c) => c.state)).toEqual(["connecting", "error"]);
    b.widget.destroy();
    expect(a.page.document.querySelectorAll("service-widget")).toHaveLength(1);
    expect(a.widget.getState()).toBe("in-call");
  });
});
